"""vLLM IR providers of the template: registration glue only.

vLLM hook: ``Platform.import_ir_kernels`` imports this package in every
process that dispatches IR ops; importing it registers the providers
``template_cpu``, ``template_triton`` and ``template_ipex`` with
``vllm.ir.ops.<op>.register_impl``. The kernels themselves live in
``vllm_platform_template.kernels`` and import without vLLM.

``supported`` (static) says whether the provider can run on this machine at
all; the reason is kept in :data:`PROVIDER_STATUS` for ``vllm-template doctor``.
``supports_args`` (per call) checks dtype, device, layout, ``variance_size``
and a missing weight - never the batch size, so dispatch does not change with
load.
"""

from vllm_platform_template.ir_impls import template_cpu, template_ipex, template_triton
from vllm_platform_template.ir_impls.status import PROVIDER_STATUS, ProviderStatus

__all__ = ["PROVIDER_STATUS", "ProviderStatus", "template_cpu", "template_ipex", "template_triton"]
