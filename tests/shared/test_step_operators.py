"""``doctor``'s decode step (``cli/step_operators.py``): what serves each operator, from the
dispatcher's own tables, and the step on the CPU reference backend.

On the PrivateUse1 test device the same step lists the extension's kernels and its
fallback (the vllm-platform-template project checks a first-light plugin's ``doctor`` there).
"""

from __future__ import annotations

import pytest

from vllm_platform_template.device_registry import DEVICE_PACKAGES
from vllm_platform_template_tools.cli.step_operators import (
    COMPOSITE,
    MISSING,
    OWN,
    served_by,
    survey,
)


def test_each_kind_of_kernel_is_told_apart() -> None:
    assert served_by("aten::mm", "CPU") == (OWN, None)
    assert served_by("aten::t", "CPU") == (COMPOSITE, "CompositeExplicitAutograd")
    # a backend no extension registers (PrivateUse1 may be the test device's, with its
    # fallback, where the tests' environment names it): no kernel, no fallback
    assert served_by("aten::mm.out", "PrivateUse3") == (MISSING, None)


@pytest.mark.skipif("cpu" not in DEVICE_PACKAGES, reason="a plugin without the CPU backend")
def test_the_cpu_backends_step_runs_its_kernel_table_on_its_own_kernels() -> None:
    report = survey("cpu")
    operators = report["operators"]
    assert report["dispatch_key"] == "CPU"
    for kernel in ("rms_norm", "fused_add_rms_norm", "silu_and_mul", "rotary_embedding"):
        assert operators[f"_C::{kernel}"]["served_by"] == OWN, operators
    assert operators["_C::fused_add_rms_norm"]["calls"] == 2  # after attention, after the MLP
    assert operators["aten::mm"] == {"calls": 5, "served_by": OWN}  # qkv, o, gate_up, down, head
    assert {e["served_by"] for e in operators.values()} <= {OWN, COMPOSITE}


def test_a_device_torch_does_not_see_is_said() -> None:
    assert survey("nosuchdevice") == {"skipped": "torch sees no nosuchdevice device"}
