"""Whether this machine can run the GPU backend: read by the entry point.

vLLM hook served: the ``vllm.platform_plugins`` entry point
(``platform_plugin.activation``) asks before it names the platform class, in
every vLLM process. The GPU platform needs no compiled vLLM file (pure-Python
vLLM is enough), but its kernels are Triton's and its device is torch's:
torch is imported here only when the GPU backend is requested.
"""

from __future__ import annotations

import importlib.util

from vllm_platform_template.settings import DEVICE_ENV

DEVICE_TYPE = "cuda"


def problem(found_vllm: tuple[str, str] | None) -> str | None:
    """A message if torch sees no device of this type or Triton is missing."""
    import torch

    device_module = getattr(torch, DEVICE_TYPE, None)  # torch.cuda; a vendor's torch.<device>
    if device_module is None or not device_module.is_available():
        return (
            f"{DEVICE_ENV}={DEVICE_TYPE} asks for the {DEVICE_TYPE} backend, but torch "
            f"{torch.__version__} sees no {DEVICE_TYPE} device on this machine. Set "
            f"{DEVICE_ENV}=cpu or run on a machine with one (and its torch extension)."
        )
    if importlib.util.find_spec("triton") is None:
        return (
            f"{DEVICE_ENV}={DEVICE_TYPE} asks for the {DEVICE_TYPE} backend, whose kernels are "
            "Triton kernels, but triton is not installed. Install "
            "`pip install 'vllm-platform-template[cuda]'` (or `pip install triton`)."
        )
    return None
