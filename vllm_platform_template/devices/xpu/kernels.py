"""Intel Extension for PyTorch (IPEX) kernels, optional.

IPEX releases are built for one torch minor version (IPEX 2.8 needs torch
2.8). :func:`status` imports IPEX only after checking that the versions match,
so an installed-but-mismatched IPEX reports itself unsupported with the reason
instead of failing at import. No vLLM import here.
"""

from __future__ import annotations

import functools
import importlib.metadata
import importlib.util
from typing import Any

import torch

from vllm_platform_template.reference_kernels.supports import RowKernels


def _minor(version: str) -> tuple[int, int]:
    major, minor = version.split("+", 1)[0].split(".")[:2]
    return int(major), int(minor)


@functools.cache
def status() -> tuple[bool, str]:
    """``(usable, reason)``: IPEX present and built for the installed torch."""
    if importlib.util.find_spec("intel_extension_for_pytorch") is None:
        return False, (
            "intel-extension-for-pytorch is not installed (it needs torch 2.8: "
            "`tox -e ipex` builds an env where template_ipex runs)"
        )
    ipex_version = importlib.metadata.version("intel-extension-for-pytorch")
    if _minor(ipex_version) != _minor(torch.__version__):
        return False, (
            f"intel-extension-for-pytorch {ipex_version} needs torch "
            f"{'.'.join(map(str, _minor(ipex_version)))}.*, but torch {torch.__version__} "
            "is installed"
        )
    try:
        import intel_extension_for_pytorch  # noqa: F401
    except Exception as e:  # a broken install must not break the plugin
        return False, f"importing intel-extension-for-pytorch failed: {e}"
    return True, f"intel-extension-for-pytorch {ipex_version}"


def _ops() -> Any:
    import intel_extension_for_pytorch as ipex

    return ipex.llm.functional


def rms_norm(
    x: torch.Tensor,
    weight: torch.Tensor | None,
    epsilon: float,
    variance_size: int | None = None,
) -> torch.Tensor:
    """IPEX fused RMSNorm (needs a weight, no ``variance_size``: ``rms_norm_supports``)."""
    if weight is None or variance_size is not None:
        raise ValueError("rms_norm: IPEX needs a weight and takes no variance_size")
    return _ops().rms_norm(x, weight, epsilon)


def fused_add_rms_norm(
    x: torch.Tensor,
    residual: torch.Tensor,
    weight: torch.Tensor | None,
    epsilon: float,
    variance_size: int | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """IPEX fused residual add + RMSNorm; returns ``(out, x + residual)``, inputs untouched.

    IPEX's ``add_rms_norm`` returns only the normalised tensor and, with
    ``add_back=True``, overwrites its ``residual`` argument with ``x + residual``;
    so it is handed a copy of the residual, which becomes the second result.
    """
    if weight is None or variance_size is not None:
        raise ValueError("fused_add_rms_norm: IPEX needs a weight and takes no variance_size")
    summed = residual.clone()
    out = _ops().add_rms_norm(summed, x, weight, None, epsilon, True)
    return out, summed


# --- which calls the kernels take (the kernel table's ``supports``) ------------------
# IPEX's row kernels: contiguous fp32/bf16 rows and a weight (they need one).
ROWS = RowKernels(
    device_types=("cpu", "xpu"),
    dtypes=(torch.float32, torch.bfloat16),
    weight_required=True,
)
rms_norm_supports = ROWS.rms_norm_supports
fused_add_rms_norm_supports = ROWS.fused_add_rms_norm_supports
