"""The CPU platform refuses quantized models when vLLM checks the config, with the reason.

vLLM wires its CPU quantized kernels by ``is_cpu()``, which the template's
out-of-tree platform is not (README, "Known limits"); stock ``CpuPlatform``
accepts every method, so the refusal is the template's own answer.
"""

from __future__ import annotations

import pytest
from vllm.platforms.cpu import CpuPlatform

from vllm_platform_template.devices.cpu.platform import TemplateCpuPlatform


@pytest.mark.parametrize("method", ["gptq_marlin", "awq", "fp8", "compressed-tensors"])
def test_every_quantization_method_is_refused_with_the_reason(method: str) -> None:
    CpuPlatform.verify_quantization(method)  # stock: no list, every method passes
    with pytest.raises(ValueError, match=f"{method} quantization is not supported.*is_cpu"):
        TemplateCpuPlatform.verify_quantization(method)
