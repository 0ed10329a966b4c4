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
