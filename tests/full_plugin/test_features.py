"""vLLM's features on the template CPU platform, each judged against stock vLLM CPU.

One engine per feature group and platform (``feature_runner.py``: fp32, eager, the
embedded tiny model), the template's and stock's started side by side: structured
output (JSON schema, regex, choice), prefix caching, chunked prefill, prompt logprobs,
``n=2`` seeded sampling and stop strings on one engine; n-gram speculative decoding;
embeddings (``runner="pooling"``); sleep mode. Each test asserts the template's answer
equals stock's (fp32: token for token, logprobs and vectors as printed) and that the
answer is the feature's (a JSON object, cached tokens counted, a stop reason...); its
support-matrix cell is its outcome (``feature_matrix.py``), or what it records when
both platforms refuse the feature (``matrix`` property: refused, with vLLM's reason).
Each template runner's exit is a test of its own, with the race at exit made certain
(``feature_runner.py --late-output-thread``): a process that printed its answer and
then crashed fails there, and its answers are still compared; a runner that printed
nothing fails the tests of its answers, with its stderr.
``test_support_matrix.py`` holds the committed ``docs/support-matrix.md`` to these
cells; LoRA's are ``test_lora.py``'s.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from engine_exit import stock_exit_abort
from feature_runner import CHUNK_BUDGET, EXIT_LINE, OUTPUT_THREAD

from vllm_platform_template.platform_hooks.entry_point import DEVICE_ENV

pytestmark = pytest.mark.e2e

RUNNER = Path(__file__).with_name("feature_runner.py")
ENGINES = ("generate", "ngram", "pooling", "sleep")
TIMEOUT_S = 900
DEVICES = ("cpu", "stock")


def _start(device: str, engine: str, cache: Path) -> subprocess.Popen:
    import os

    env = {k: v for k, v in os.environ.items() if k != DEVICE_ENV}
    env["VLLM_CACHE_ROOT"] = str(cache)
    return subprocess.Popen(
        [sys.executable, str(RUNNER), device, engine, "--late-output-thread"],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _finish(proc: subprocess.Popen) -> subprocess.CompletedProcess:
    try:
        stdout, stderr = proc.communicate(timeout=TIMEOUT_S)
    except subprocess.TimeoutExpired:
        proc.kill()
        stdout, stderr = proc.communicate()
        stderr += f"\n(killed after {TIMEOUT_S} s)"
    return subprocess.CompletedProcess(proc.args, proc.returncode, stdout, stderr)


@pytest.fixture(scope="module")
def runs(engine_runs) -> dict[str, dict[str, subprocess.CompletedProcess]]:
    """``runs[engine][device]``: each runner process as it ended; the two platforms side by side."""
    out: dict[str, dict[str, subprocess.CompletedProcess]] = {}
    for engine in ENGINES:
        procs = {d: _start(d, engine, engine_runs.cache_root) for d in DEVICES}
        out[engine] = {device: _finish(proc) for device, proc in procs.items()}
    return out


def _alive_at_finalization(proc: subprocess.CompletedProcess) -> list[str] | None:
    """The output threads the runner found alive as its interpreter began to finalize."""
    found = [line.split(EXIT_LINE, 1)[1] for line in proc.stderr.splitlines() if EXIT_LINE in line]
    return json.loads(found[-1]) if found else None


@pytest.mark.parametrize("engine", ENGINES)
def test_every_template_runner_exits_cleanly(runs, engine: str) -> None:
    """A runner's exit is a test of its own: a crash at exit fails here, not the answers it
    printed. Each runner's output thread woke late from its stop signal, so only a main
    thread that waits for it (patch client_threads_end_before_the_interpreter) finds it
    ended before finalization - the path taken, which an exit status alone can hide."""
    proc = runs[engine]["cpu"]
    where = f"template {engine} runner, exit {proc.returncode}:\n{proc.stderr[-5000:]}"
    assert proc.returncode == 0, where
    assert _alive_at_finalization(proc) == [], where


def test_stock_leaves_its_output_thread_to_the_finalizing_interpreter(runs) -> None:
    """The reference that the patch is still needed: stock vLLM's pooling runner exits
    (0, or vLLM's known exit abort after a complete answer: tests/engine_exit.py) with its
    output thread still alive at finalization, where freeing its tensors aborts."""
    for engine in ENGINES:
        proc = runs[engine]["stock"]
        assert proc.returncode == 0 or stock_exit_abort(["--stock"], proc), proc.stderr[-5000:]
    pooling = runs["pooling"]["stock"]
    assert _alive_at_finalization(pooling) == [OUTPUT_THREAD], (
        "stock vLLM's output thread ended before finalization: vLLM may now wait for it "
        "(the patch's remove_when)\n" + pooling.stderr[-5000:]
    )


def _answer(runs: dict, engine: str, device: str) -> dict[str, Any]:
    """The report a runner printed, whatever its exit status (the exit tests judge that)."""
    proc = runs[engine][device]
    lines = proc.stdout.strip().splitlines()
    if not lines:
        pytest.fail(f"the {device} {engine} runner printed no answer:\n{proc.stderr[-5000:]}")
    return json.loads(lines[-1])


def _both(runs: dict, engine: str, key: str) -> tuple[Any, Any]:
    ours, stock = (_answer(runs, engine, d) for d in DEVICES)
    assert ours["platform"] == "TemplateCpuPlatform" and stock["platform"] == "CpuPlatform"
    return ours[key], stock[key]


@pytest.mark.feature("structured output")
def test_structured_output(runs) -> None:
    for key in ("structured_json", "structured_regex", "structured_choice"):
        ours, stock = _both(runs, "generate", key)
        assert ours == stock, key
    # the schema's object, begun (the tiny model pads it with the whitespace JSON allows,
    # so 48 tokens may end before the closing brace)
    text = _answer(runs, "generate", "cpu")["structured_json"]
    assert text.lstrip().startswith("{") and '"name"' in text
    assert _answer(runs, "generate", "cpu")["structured_choice"] in ("Bennet", "Darcy", "Bingley")


@pytest.mark.feature("prefix caching")
def test_prefix_caching(runs) -> None:
    ours, stock = _both(runs, "generate", "prefix_caching")
    assert ours == stock
    assert ours["cached_first"] == 0 and ours["cached_again"] >= 256 and ours["same_tokens"]


@pytest.mark.feature("chunked prefill")
def test_chunked_prefill(runs) -> None:
    ours, stock = _both(runs, "generate", "chunked_prefill")
    assert ours == stock and len(ours["tokens"]) == 16
    # the prompt was prefilled in chunks: longer than the scheduler's budget for one step,
    # with chunking on, as the platform's config left them (a platform may turn them off)
    assert ours["enabled"] and ours["budget"] == CHUNK_BUDGET < ours["prompt_tokens"]


@pytest.mark.feature("prompt logprobs")
def test_prompt_logprobs(runs) -> None:
    ours, stock = _both(runs, "generate", "prompt_logprobs")
    assert ours == stock and ours[0] is None and all(entry for entry in ours[1:])


@pytest.mark.feature("n>1 seeded sampling")
def test_n2_seeded_sampling(runs) -> None:
    ours, stock = _both(runs, "generate", "n2_seeded")
    assert _answer(runs, "generate", "cpu")["n2_seeded_again"] == ours  # the seed decides
    assert ours == stock and len(ours) == 2 and ours[0] != ours[1]


@pytest.mark.feature("stop strings")
def test_stop_strings(runs) -> None:
    ours, stock = _both(runs, "generate", "stop_strings")
    assert ours == stock and ours["finish_reason"] == "stop" and "," not in ours["text"]


@pytest.mark.feature("speculative decoding (ngram)")
def test_ngram_speculative_decoding(runs, hf_greedy) -> None:
    ours, stock = _both(runs, "ngram", "ngram_tokens")
    assert ours == stock
    prompts = _answer(runs, "ngram", "cpu")["ngram_prompt_ids"]
    assert ours == hf_greedy(prompts, 32)  # speculation changes no greedy token
    metrics, stock_metrics = _both(runs, "ngram", "spec_decode_metrics")
    assert metrics == stock_metrics and metrics["vllm:spec_decode_num_drafts"] > 0
    accepted = metrics["vllm:spec_decode_num_accepted_tokens"]
    drafted = metrics["vllm:spec_decode_num_draft_tokens"]
    print(f"ngram: {accepted}/{drafted} draft tokens accepted (stock the same)")


@pytest.mark.feature("embeddings (pooling)")
def test_embeddings(runs) -> None:
    ours, stock = _both(runs, "pooling", "embeddings")
    assert ours == stock and len(ours) == 2 and ours[0] != ours[1]


@pytest.mark.feature("sleep mode")
def test_sleep_mode_is_refused_as_stock_refuses_it(runs, record_property) -> None:
    ours, stock = (_answer(runs, "sleep", d) for d in DEVICES)
    assert "refused" in stock, "stock vLLM CPU runs sleep mode now: test it on the template"
    assert ours.get("refused") == stock["refused"]
    assert "Sleep mode is not supported on current platform" in ours["refused"]
    record_property("matrix", "refused: vLLM's CPU platform has no sleep mode (stock the same)")
