"""Structured output's bitmask on a device Inductor has no backend for (the registry's
``grammar_bitmask_without_inductor``, ``patches.py``).

vLLM masks each structured step's logits with xgrammar's ``apply_token_bitmask_inplace``,
whose automatic choice compiles with torch.compile on any device xgrammar has no kernel
of its own for. On the PrivateUse1 test device (``tests/test_device``, named
``accel``: no Inductor backend, as at first light) that dies; patched, xgrammar's
plain-torch kernel masks the same logits the CPU kernel masks. Checked in a child
process with the device, unpatched first (the patch's ``remove_when``: the day this
passes unpatched, it can go).
"""

from __future__ import annotations

import pytest

pytest.importorskip("npu_test_device")
pytest.importorskip("xgrammar")

from test_device_child import run_with_test_device

# The test device's name here: xgrammar sends ``npu`` (Ascend's) to plain torch itself.
DEVICE = "accel"


def test_the_bitmask_masks_on_a_device_without_inductor_as_on_the_cpu() -> None:
    found = run_with_test_device(
        f"""
        import json, torch, xgrammar
        from vllm_platform_template import patches
        DEVICE = {DEVICE!r}

        gen = torch.Generator().manual_seed(0)
        logits = torch.randn(3, 100, generator=gen)
        bitmask = torch.randint(-2**31, 2**31 - 1, (3, 4), dtype=torch.int32, generator=gen)
        expected = logits.clone()
        xgrammar.apply_token_bitmask_inplace(expected, bitmask, indices=[0, 2])

        def on_device():
            device_logits = logits.to(DEVICE)
            xgrammar.apply_token_bitmask_inplace(device_logits, bitmask.to(DEVICE),
                                                 indices=[0, 2])
            return device_logits.cpu()

        try:
            on_device()
            unpatched = "ran"
        except Exception as exc:  # torch._inductor's error, whatever its class
            unpatched = type(exc).__name__ + ": " + str(exc)[:200]
        patches._bitmask_in_torch_where_inductor_has_no_backend(xgrammar)
        masked = on_device()
        print(json.dumps({{
            "unpatched": unpatched,
            "equal": torch.equal(masked, expected),
            "masked": int(torch.isinf(masked).sum()),
            "row_1_untouched": torch.equal(masked[1], logits[1]),
        }}))
        """,
        NPU_TEST_DEVICE_NAME=DEVICE,
    )
    assert found["unpatched"] != "ran" and DEVICE in found["unpatched"], found
    assert found["equal"] and found["masked"] > 0 and found["row_1_untouched"], found
