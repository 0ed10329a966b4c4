"""The template's ``CustomOp.register_oot`` replacements beside another plugin's.

vLLM keeps one out-of-tree replacement per layer and asserts on a second. A
general plugin that replaced a layer first (as vLLM's own dummy platform plugin
replaces ``RotaryEmbedding``) keeps it; the template registers the rest and the
process goes on. Run in a subprocess: the registry is process-global.
"""

from __future__ import annotations

import subprocess
import sys

CODE = """
from vllm.model_executor.custom_op import op_registry_oot
from vllm.model_executor.layers.rotary_embedding import RotaryEmbedding

@RotaryEmbedding.register_oot
class OtherRotaryEmbedding(RotaryEmbedding):
    pass

from vllm_platform_template.custom_ops import REPLACEMENTS, register_custom_ops

register_custom_ops()
register_custom_ops()
print({layer: op_registry_oot[layer].__qualname__ for layer in REPLACEMENTS.values()})
"""


def test_another_plugins_replacement_is_kept_and_ours_are_registered() -> None:
    result = subprocess.run(
        [sys.executable, "-c", CODE], capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout.strip().splitlines()[-1] == str(
        {
            "SiluAndMul": "TemplateSiluAndMul",
            "RMSNorm": "TemplateRMSNorm",
            "RotaryEmbedding": "OtherRotaryEmbedding",
        }
    )
    assert "RotaryEmbedding is already replaced by __main__.OtherRotaryEmbedding" in result.stderr


HW_AGNOSTIC_CODE = """
import json
from vllm_platform_template_tools.cli.doctor import layer_replacements

before = layer_replacements()  # registers, as the general plugin does in every process
from vllm.model_executor.models.transformers.fusers import rms_norm  # the backend's fuser

print(json.dumps([before, layer_replacements()]))
"""


def test_hw_agnostic_layers_are_replaced_and_doctor_lists_them() -> None:
    """vLLM's hardware-agnostic registry gets the replacements too; the Transformers
    backend's ``TPAwareRMSNorm`` once vLLM imports its fuser (with VLLM_USE_HW_AGNOSTIC=1,
    whose ``RMSNorm`` is then the hardware-agnostic one)."""
    import json
    import os

    env = {**os.environ, "VLLM_USE_HW_AGNOSTIC": "1"}
    result = subprocess.run(
        [sys.executable, "-c", HW_AGNOSTIC_CODE],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    before, after = json.loads(result.stdout.strip().splitlines()[-1])
    assert before["hardware-agnostic"] == {
        "RMSNorm": "TemplateHwAgnosticRMSNorm",
        "SiluAndMul": "TemplateHwAgnosticSiluAndMul",
    }
    assert before["CustomOp"]["RMSNorm"] == "TemplateRMSNorm"
    assert after["hardware-agnostic"]["TPAwareRMSNorm"] == "TemplateTPAwareRMSNorm"
