"""The worker of the template's XPU platform (reserved): vLLM's XPU worker plus reports."""

from __future__ import annotations

from vllm.v1.worker.xpu_worker import XPUWorker

from vllm_platform_template.platform_hooks.worker_reports import TemplateWorkerReports


class TemplateXPUWorker(TemplateWorkerReports, XPUWorker):
    """vLLM's ``XPUWorker`` for the template XPU platform."""
