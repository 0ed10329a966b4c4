"""The XPU platform of the template (reserved; unverified on hardware).

vLLM hook: the class the entry point (``platform_hooks.entry_point.register``) names for
``VLLM_TEMPLATE_DEVICE=xpu``. Built on vLLM's ``XPUPlatform`` (upstream
PyTorch's XPU device) with the ``template_ipex`` IR provider first in eager
mode and the fusion-only stage. No XPU was available to this project: its
config policy (IR priorities, graph defaults) is unit-tested on CPU
(``tests/devices/xpu/test_xpu_device.py``); nothing here has run on an XPU.
Imported only when selected (``vllm.platforms.xpu`` needs ``vllm_xpu_kernels``).
"""

from __future__ import annotations

from vllm.platforms.xpu import XPUPlatform

from vllm_platform_template.devices.xpu.device import DEVICE
from vllm_platform_template.platform_hooks.mixin import TemplatePlatformMixin

STOCK_XPU_WORKER = "vllm.v1.worker.xpu_worker.XPUWorker"
TEMPLATE_XPU_WORKER = "vllm_platform_template.devices.xpu.worker.TemplateXPUWorker"


class TemplateXpuPlatform(TemplatePlatformMixin, XPUPlatform):
    """vLLM's XPU platform as an out-of-tree platform of the template."""

    template_device = DEVICE
    stock_worker_cls = STOCK_XPU_WORKER
    template_worker_cls = TEMPLATE_XPU_WORKER
