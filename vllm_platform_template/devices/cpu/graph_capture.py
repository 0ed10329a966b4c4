"""Drive the capture of every piecewise graph size, like the GPU worker does.

vLLM hook: none exists for this on the CPU path - vLLM's ``CPUWorker`` never
calls ``capture_model`` (``GPUModelRunner.capture_model`` also assumes CUDA
streams and a CUDA communicator in ``graph_capture``). The template worker
calls :func:`capture_piecewise_graphs` before ``CPUWorker.compile_or_warm_up_model``
(the model runner's own per-size warm-up runs precede each capture); it walks the sizes
vLLM's ``CudagraphDispatcher`` prepared and runs the model runner's own
``_capture_cudagraphs`` (warm-up runs then one captured run per batch
descriptor), so padding and dispatch are exactly vLLM's.
"""

from __future__ import annotations

import time
from typing import Any

from vllm.compilation.counter import compilation_counter
from vllm.compilation.monitor import set_cudagraph_capturing_enabled
from vllm.config import CUDAGraphMode

from vllm_platform_template.log import get_logger

logger = get_logger(__name__)


def capture_piecewise_graphs(model_runner: Any) -> int:
    """Capture all PIECEWISE graph sizes of ``model_runner``; returns the number captured."""
    if model_runner.compilation_config.cudagraph_mode == CUDAGraphMode.NONE:
        return 0
    descriptors = model_runner.cudagraph_dispatcher.get_capture_descs()
    if not descriptors:
        logger.warning("template: graph mode is on but vLLM prepared no capture sizes")
        return 0
    modes = {mode for mode, _ in descriptors}
    if modes != {CUDAGraphMode.PIECEWISE}:
        raise ValueError(f"the template graph wrapper captures PIECEWISE only, got {modes}")
    before = compilation_counter.num_cudagraph_captured
    compilation_counter.num_gpu_runner_capture_triggers += 1
    start = time.perf_counter()
    set_cudagraph_capturing_enabled(True)
    try:
        with model_runner._freeze_gc():
            for mode, batch_descriptors in descriptors:
                model_runner._capture_cudagraphs(
                    batch_descriptors=batch_descriptors, cudagraph_runtime_mode=mode
                )
    finally:
        set_cudagraph_capturing_enabled(False)
    captured = compilation_counter.num_cudagraph_captured - before
    logger.info(
        "template: captured %d piecewise graphs for sizes %s in %.2f s",
        captured,
        sorted({d.num_tokens for _, ds in descriptors for d in ds}),
        time.perf_counter() - start,
    )
    return captured
