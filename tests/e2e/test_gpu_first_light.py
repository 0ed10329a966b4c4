"""First light of the device folder, proven without the device: one eager engine on the CPU.

``first_light_on_cpu.py`` points the folder's identity table at the CPU (torch
names ``cpu``/``CPU``/``gloo``, no kernel compiler, graph API or array
interface) and registers the folder alone, under ``cpu``; then the folder's
platform, worker (vLLM's GPU worker with the folder's ``init_device``),
communicator, kernel table and attention run one vLLM engine in eager mode.
Greedy tokens must equal transformers' on the same prompts, and the report
must show that the folder's first-light tier ran: its platform class, no
compilation, no graphs, the ``TEMPLATE_ATTN`` backend. The first-light tier
itself is ``availability.HOOKS``'; docs/porting-guide.md, "7. Eager mode: the
first token". On a machine with the device (``-m gpu``), the same engine runs
on the device, with the identity table as it is.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from hf_reference import decoding_of, hf_greedy_on

from vllm_platform_template.devices.gpu.identity import IDENTITY
from vllm_platform_template.devices.gpu.platform import TemplateGpuPlatform
from vllm_platform_template.settings import DEVICE_ENV

pytestmark = pytest.mark.e2e

RUNNER = Path(__file__).with_name("first_light_on_cpu.py")
PLATFORM = f"{TemplateGpuPlatform.__module__}.{TemplateGpuPlatform.__qualname__}"
# On the device: a fixed KV cache, a share of its memory at start, few sequences.
ENGINE = {"max_num_seqs": 8, "gpu_memory_utilization": 0.08, "kv_cache_memory_bytes": 1 << 30}


@pytest.fixture(scope="module")
def first_light(tmp_path_factory: pytest.TempPathFactory) -> dict:
    env = {k: v for k, v in os.environ.items() if k != DEVICE_ENV}
    env["VLLM_CACHE_ROOT"] = str(tmp_path_factory.mktemp("first-light-cache"))
    proc = subprocess.run(
        [sys.executable, str(RUNNER), "--json"],
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert proc.returncode == 0, proc.stderr[-6000:]
    report = json.loads(proc.stdout.strip().splitlines()[-1])
    report["_stderr"] = proc.stderr
    return report


def test_the_folder_generates_transformers_tokens_on_the_cpu(first_light, hf_greedy) -> None:
    expected = hf_greedy(first_light["prompt_token_ids"], **decoding_of(first_light))
    assert first_light["tokens"] == expected
    assert all(len(tokens) == 32 for tokens in first_light["tokens"])


def test_what_ran_is_the_folders_first_light_tier(first_light) -> None:
    assert (first_light["platform"], first_light["device"]) == (PLATFORM, "cpu")
    assert first_light["compilation_mode"] == "NONE"
    assert first_light["cudagraph_mode"] == "NONE"
    assert first_light["attention_backends"] == ["TEMPLATE_ATTN"]
    assert "first light: eager, V1 model runner, synchronous scheduling" in first_light["_stderr"]
    # no traceback but vLLM's for another plugin it found and could not load
    stderr = first_light["_stderr"]
    foreign = stderr.count("Failed to load plugin ") - stderr.count(
        "Failed to load plugin template\n"
    )
    assert stderr.count("Traceback") == foreign, stderr[-6000:]


@pytest.mark.gpu
@pytest.mark.skipif(not IDENTITY.present(), reason=f"needs a {IDENTITY.device_type} device")
def test_the_folder_generates_transformers_tokens_on_the_device(
    engine_runs, tiny_model_dir
) -> None:
    """Device tier: one eager engine on the device the identity table names, as generated."""
    device = IDENTITY.device_type
    report = engine_runs.run(
        "--device", device, "--enforce-eager", "--engine-args", json.dumps(ENGINE)
    )
    expected = hf_greedy_on(tiny_model_dir, device)(
        report["prompt_token_ids"], **decoding_of(report)
    )
    assert report["platform"] == PLATFORM
    assert report["tokens"] == expected
