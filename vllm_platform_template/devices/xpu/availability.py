"""Whether this machine can run the XPU backend (reserved): read by the entry point.

vLLM hook served: the ``vllm.platform_plugins`` entry point
(``platform_hooks.entry_point``) asks before it names the platform class;
torch is imported here only when the XPU backend is requested.
"""

from __future__ import annotations

from vllm_platform_template.settings import DEVICE_ENV


def problem(found_vllm: tuple[str, str] | None) -> str | None:
    """A message if torch sees no XPU device."""
    import torch

    xpu = getattr(torch, "xpu", None)
    if xpu is None or not xpu.is_available() or xpu.device_count() == 0:
        return (
            f"{DEVICE_ENV}=xpu asks for the XPU backend (reserved: built on PyTorch's XPU "
            "support and IPEX), but torch sees no XPU device on this machine. Set "
            f"{DEVICE_ENV}=cpu or cuda."
        )
    return None
