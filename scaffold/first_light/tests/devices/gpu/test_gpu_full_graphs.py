"""The speed tier on the device: its own kernels in FULL decode graphs, captured and replayed.

What turns graphs on is in the device folder: ``identity.py`` names torch's
device-neutral graphs (``torch.accelerator.Graph``), ``kernels/`` and
``attention_kernels.py`` take the device extension's kernels where it registers them
(``torch.ops.<library>``: the PrivateUse1 test device registers them all), and those
attention kernels declare that a graph may hold them (``full_graphs``). Until the
device's extension offers the graphs and the attention kernels, this module skips,
saying which is missing (docs/porting-guide.md, "11. Attention kernels" and "13.
Graph capture").

One engine in the probe's process (``device_probe.py``), uncompiled, with
``FULL_DECODE_ONLY`` and two sequences at once: three prompts of 32 greedy tokens, the
first two decoding 31 steps as a batch of two (replays of the graph of two), the third
31 steps alone (the graph of one). Asserted: the mode that ran, the captures and
replays counted from the runner, the tokens equal transformers', the attention path
the device's, and where the device counts its launches (the test device does), its
kernels ran inside the replays and a replayed step left to its CPU fallback only aten
operators a device's extension implements (printed, operator by operator).
"""

from __future__ import annotations

import json

import pytest
from device_probe import run_in_child
from hf_reference import decoding_of

from vllm_platform_template.devices.gpu import kernels
from vllm_platform_template.devices.gpu.attention_kernels import (
    DeviceAttentionKernels,
    attention_kernels,
)
from vllm_platform_template.devices.gpu.availability import graph_api, graph_api_problem
from vllm_platform_template.devices.gpu.identity import ACCELERATOR_GRAPH, IDENTITY


def _not_ready() -> str | None:
    """Why the folder cannot run FULL graphs on this machine's device (None: it can)."""
    if not IDENTITY.present():
        return f"needs a {IDENTITY.device_type} device"
    if graph_api() != ACCELERATOR_GRAPH:
        why = graph_api_problem() or f"identity.py names graph_api={IDENTITY.graph_api!r}"
        return f"no torch.accelerator.Graph to capture with ({why}): see '13. Graph capture'"
    if not attention_kernels().full_graphs:
        return (
            f"the device's extension registers no {kernels.LIBRARY}::reshape_and_cache and "
            "paged_attention, and the reference attention reads each step's lengths on the "
            "host: see docs/porting-guide.md, '11. Attention kernels'"
        )
    return None


pytestmark = [
    pytest.mark.e2e,
    pytest.mark.gpu,
    pytest.mark.skipif(_not_ready() is not None, reason=str(_not_ready())),
]

DEVICE = IDENTITY.device_type
ENGINE = {
    "max_num_seqs": 2,
    "gpu_memory_utilization": 0.05,
    "kv_cache_memory_bytes": 64 << 20,
    "compilation_config": {"cudagraph_mode": "FULL_DECODE_ONLY"},
}
STEPS = 31  # decode steps of each prompt after its first token
ATTENTION_KERNELS = ("reshape_and_cache", "paged_attention")
# What a replayed decode step may leave to the test device's CPU fallback: aten operators
# a device's torch extension implements (the linear layers' matmul, the token embedding's
# lookup), none of the kernel table's or the attention's work.
ATEN_IN_A_DECODE_STEP = {"aten::mm.out", "aten::index_select"}


@pytest.fixture(scope="module")
def full(tmp_path_factory: pytest.TempPathFactory) -> dict:
    cache = tmp_path_factory.mktemp("full-graphs-cache")
    return run_in_child(cache, "--device", DEVICE, "--engine-args", json.dumps(ENGINE))


def test_decode_steps_replay_full_graphs(full) -> None:
    assert full["cudagraph_mode"] == "FULL_DECODE_ONLY", full["graph_mode_reason"]
    graphs = full["graphs"]["full"]
    assert graphs["captures"] == {"1": 1, "2": 1}, graphs
    assert graphs["replays"]["2"] >= STEPS and graphs["replays"]["1"] >= STEPS, graphs
    assert not graphs["eager_fallbacks"], graphs


def test_the_replays_generate_transformers_tokens(full, hf_greedy) -> None:
    assert full["tokens"] == hf_greedy(full["prompt_token_ids"], **decoding_of(full))


def test_attention_ran_the_devices_kernels(full) -> None:
    assert full["attention_backends"] == ["TEMPLATE_ATTN"]
    assert f"TEMPLATE_ATTN path {DeviceAttentionKernels.name} " in full["_stderr"]


def test_the_replays_ran_the_devices_kernels(full) -> None:
    counts = full["device_dispatch"]
    if counts is None:
        pytest.skip(f"{DEVICE} does not count the calls it serves (the test device does)")
    assert counts["runtime::Graph::replay"] >= 2 * STEPS
    launched = (*kernels.DEVICE_KERNELS, *ATTENTION_KERNELS)
    short = {
        k: counts.get(f"replay:{kernels.LIBRARY}::{k}", 0)
        for k in launched
        if counts.get(f"replay:{kernels.LIBRARY}::{k}", 0) < 2 * STEPS
    }
    assert not short, f"kernels replayed fewer than {2 * STEPS} times: {short}"


def test_a_replayed_step_leaves_only_aten_operators_to_the_cpu_fallback(full, capsys) -> None:
    counts = full["device_dispatch"]
    if counts is None:
        pytest.skip(f"{DEVICE} does not count the calls it serves (the test device does)")
    steps = counts["runtime::Graph::replay"]
    replayed = {k.removeprefix("replay:"): n for k, n in counts.items() if k.startswith("replay:")}

    def served_by(operator: str) -> str:
        if operator.startswith(f"{kernels.LIBRARY}::"):
            return "the device's kernel"
        return "CPU fallback" if f"cpu_fallback:{operator}" in counts else "the device (owned)"

    with capsys.disabled():
        print(f"\n{DEVICE}: one replayed decode step ({steps} replays), operator by operator")
        for operator, calls in sorted(replayed.items(), key=lambda item: (-item[1], item[0])):
            print(f"{calls / steps:>6.1f}  {operator:<32} {served_by(operator)}")
    fallback = {op for op in replayed if served_by(op) == "CPU fallback"}
    assert fallback <= ATEN_IN_A_DECODE_STEP, sorted(fallback)
