"""The platforms' LoRA hook (``Platform.get_punica_wrapper``): the class a device folder
names, and a folder that names none refuses ``enable_lora`` when vLLM checks the config.
"""

from __future__ import annotations

import types

import pytest


def test_a_folder_without_a_punica_wrapper_refuses_lora_at_config_time() -> None:
    from vllm_platform_template.devices.cpu.platform import TemplateCpuPlatform
    from vllm_platform_template.devices.gpu.platform import TemplateGpuPlatform

    config = types.SimpleNamespace(lora_config=object())
    with pytest.raises(ValueError, match="names no punica_wrapper"):
        TemplateGpuPlatform._check_lora(config)  # type: ignore[arg-type]
    TemplateGpuPlatform._check_lora(types.SimpleNamespace(lora_config=None))  # type: ignore[arg-type]
    TemplateCpuPlatform._check_lora(config)  # type: ignore[arg-type]
    assert TemplateCpuPlatform.get_punica_wrapper().endswith("lora.punica.TemplatePunicaWrapper")
