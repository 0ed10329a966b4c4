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


def problem(found_vllm: tuple[str, str] | None) -> str | None:
    """A message if torch sees no CUDA device or Triton is missing."""
    import torch

    if not torch.cuda.is_available() or torch.cuda.device_count() == 0:
        return (
            f"{DEVICE_ENV}=cuda asks for the GPU reference backend, but torch "
            f"{torch.__version__} sees no CUDA device on this machine. Set {DEVICE_ENV}=cpu "
            "or run on a machine with an NVIDIA GPU."
        )
    if importlib.util.find_spec("triton") is None:
        return (
            f"{DEVICE_ENV}=cuda asks for the GPU reference backend, whose kernels are "
            "Triton kernels, but triton is not installed. Install "
            "`pip install 'vllm-platform-template[cuda]'` (or `pip install triton`)."
        )
    return None
