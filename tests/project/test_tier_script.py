"""``tools/gpu_tier.sh``: a wrong stage or a machine without a GPU stops at once, saying why."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
import torch

SCRIPT = Path(__file__).resolve().parents[2] / "tools" / "gpu_tier.sh"


def _run(*args: str, tmp_path: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        ["bash", str(SCRIPT), *args, str(tmp_path / "results")],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip


def test_unknown_stage_is_refused_before_anything_runs(tmp_path) -> None:
    proc = _run("kernel", tmp_path=tmp_path)
    assert proc.returncode == 2
    assert "unknown stage: kernel" in proc.stderr and "kernels|engine" in proc.stderr
    assert not (tmp_path / "results").exists()


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the refusal on a machine without one")
@pytest.mark.parametrize("stage", ["kernels", "bench-e2e", "upstream", "all"])
def test_a_machine_without_a_gpu_is_refused(stage: str, tmp_path) -> None:
    # A stage the script knows gets past the name check to the GPU check.
    proc = _run(stage, tmp_path=tmp_path)
    assert proc.returncode != 0
    assert "the GPU tier needs a CUDA GPU" in proc.stderr
