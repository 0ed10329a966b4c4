"""The worker of the template's CUDA platform: vLLM's GPU worker plus the report RPCs.

vLLM hook: ``parallel_config.worker_cls``. On CUDA the stock ``Worker``
already captures graphs and binds the device; the template adds nothing to
the execution path, only ``template_report``/``template_stats``.
"""

from __future__ import annotations

from vllm.v1.worker.gpu_worker import Worker

from vllm_platform_template.platform_plugin.worker_reports import TemplateWorkerReports


class TemplateGPUWorker(TemplateWorkerReports, Worker):
    """vLLM's ``Worker`` for the template CUDA platform."""
