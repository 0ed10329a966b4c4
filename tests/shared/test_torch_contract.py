"""The torch-extension contract's probes (``devices/gpu/torch_contract.py``) on a device.

On the PrivateUse1 test device (a child process with ``NPU_TEST_DEVICE=1``) every
row holds; without the device every row says so; a row whose piece is missing
names it (a ``torch.distributed`` backend nobody registered).
"""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys

import pytest

from vllm_platform_template.devices.gpu.identity import IDENTITY
from vllm_platform_template.devices.gpu.torch_contract import CONTRACT, probe

pytest.importorskip("npu_test_device")

TEST_DEVICE = dataclasses.replace(
    IDENTITY, device_type="npu", torch_module="npu", dispatch_key="PrivateUse1"
)


def _probe_on_the_test_device(dist_backend: str) -> dict[str, str | None]:
    fields = dataclasses.asdict(dataclasses.replace(TEST_DEVICE, dist_backend=dist_backend))
    code = (
        "import dataclasses, json\n"
        "from vllm_platform_template.devices.gpu import identity, torch_contract\n"
        f"test_device = dataclasses.replace(identity.IDENTITY, **{fields!r})\n"
        "print(json.dumps(torch_contract.probe(test_device)))\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code],
        env={**os.environ, "NPU_TEST_DEVICE": "1", "NPU_TEST_DEVICE_NAME": "npu"},
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert proc.returncode == 0, proc.stderr[-4000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_the_test_device_meets_every_row() -> None:
    assert _probe_on_the_test_device("npuccl") == {row.name: None for row in CONTRACT}


def test_a_missing_piece_is_named() -> None:
    results = _probe_on_the_test_device("nosuchccl")
    assert results["torch.distributed backend"] == "AssertionError: 'nosuchccl' is not registered"
    assert [name for name, problem in results.items() if problem] == ["torch.distributed backend"]


@pytest.mark.skipif(TEST_DEVICE.present(), reason="the test device is registered here")
def test_without_the_device_every_row_says_so() -> None:
    assert probe(TEST_DEVICE) == {row.name: "torch sees no npu device" for row in CONTRACT}
