"""vLLM's features on each template device present here, each judged against stock vLLM.

The devices are the plugin's folders whose device this machine has (the registry's, as
the platform entry point judges them: the CPU backend here, the PrivateUse1 test device
in a first-light plugin's CI). One engine per feature group and platform
(``feature_runner.py``: fp32, eager, the embedded tiny model), the template's and
stock's started side by side: structured output (JSON schema, regex, choice), prefix
caching, chunked prefill, prompt logprobs, ``n=2`` seeded sampling and stop strings on
one engine; n-gram and draft-model speculative decoding; embeddings
(``runner="pooling"``); sleep mode; KV-cache offload to host memory; classification and
scoring (the LM head's ``No``/``Yes`` rows as a classifier); LoRA (two adapters, mixed in
one batch and swapped, in the platform's default graph mode); image input (the embedded
BLIP-2, ``tiny-blip2``).

Stock vLLM runs on its own platform for this machine. Where that is the device's own
(the CPU backend against vLLM's CPU platform) the template's answer must equal stock's
as printed (fp32: token for token, logprobs, vectors); on another device (the test device
against stock vLLM CPU) tokens and logprobs must still be equal, vectors within
:data:`VECTOR_TOLERANCE`, and seeded samples come from the device's own generator, so
they are checked for their seed, not against the host's. Each test also asserts the
answer is the feature's (a JSON object, cached tokens counted, a stop reason...).

A feature the template refuses must be refused by a config check with its reason (never
an engine that dies at start): the cell is ``refused: REASON``; where stock refuses it
too, the test says so. Every other cell is the test's outcome (``feature_matrix.py``).
Each template runner's exit is a test of its own, with the race at exit made certain
(``feature_runner.py --late-output-thread``): a process that printed its answer and
then crashed fails there, and its answers are still compared; a runner that printed
nothing fails the tests of its answers, with its stderr.
"""

from __future__ import annotations

import functools
import importlib
import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from engine_exit import stock_exit_abort
from feature_runner import CHUNK_BUDGET, EXIT_LINE, OUTPUT_THREAD, PROMPT, images

from vllm_platform_template.device_registry import DEVICE_PACKAGES, PLATFORM_QUALNAMES
from vllm_platform_template.platform_hooks.entry_point import (
    DEVICE_ENV,
    device_problem,
    installed_vllm,
)

pytestmark = pytest.mark.e2e

RUNNER = Path(__file__).with_name("feature_runner.py")
ENGINES = ("generate", "ngram", "draft", "pooling", "sleep", "offload", "classify", "lora",
           "multimodal")  # fmt: skip
TIMEOUT_S = 900
STOCK = "stock"
# The template devices this machine has (the entry point's own judgement of each folder).
DEVICES_HERE = tuple(d for d in DEVICE_PACKAGES if device_problem(d, installed_vllm()) is None)
# Embedding vectors printed to 1e-5: another device's arithmetic may round the last digit.
VECTOR_TOLERANCE = 2e-5


def _start(device: str, engine: str, cache: Path) -> subprocess.Popen:
    env = {k: v for k, v in os.environ.items() if k != DEVICE_ENV}
    env["VLLM_CACHE_ROOT"] = str(cache)
    return subprocess.Popen(
        [sys.executable, str(RUNNER), device, engine, "--late-output-thread"],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,  # its engine's processes with it, in one group to stop
    )


def _printed(proc: subprocess.CompletedProcess) -> dict[str, Any] | None:
    """The report a runner printed (its last stdout line), None if it printed none."""
    lines = proc.stdout.strip().splitlines()
    return json.loads(lines[-1]) if lines else None


def _refused_at_config(proc: subprocess.CompletedProcess) -> bool:
    report = _printed(proc)
    return report is not None and report.get("refused_at") == "config"


def _finish(proc: subprocess.Popen) -> subprocess.CompletedProcess:
    try:
        stdout, stderr = proc.communicate(timeout=TIMEOUT_S)
    except subprocess.TimeoutExpired:
        proc.kill()
        stdout, stderr = proc.communicate()
        stderr += f"\n(killed after {TIMEOUT_S} s)"
    return subprocess.CompletedProcess(proc.args, proc.returncode, stdout, stderr)


@pytest.fixture(scope="module")
def runs(engine_runs) -> dict[str, dict[str, subprocess.CompletedProcess | None]]:
    """``runs[engine][device or "stock"]``: each runner process as it ended; every platform
    of one engine side by side. Where every template device refused the engine at config
    time, nothing of stock's is compared: its runner is stopped (None), but for sleep mode,
    whose test holds the refusal to stock's."""
    out: dict[str, dict[str, subprocess.CompletedProcess | None]] = {}
    for engine in ENGINES:
        procs = {d: _start(d, engine, engine_runs.cache_root) for d in (*DEVICES_HERE, STOCK)}
        ended: dict[str, subprocess.CompletedProcess | None] = {
            d: _finish(procs[d]) for d in DEVICES_HERE
        }
        if engine != "sleep" and all(_refused_at_config(p) for p in ended.values() if p):
            os.killpg(procs[STOCK].pid, signal.SIGKILL)
            procs[STOCK].communicate()
            ended[STOCK] = None
        else:
            ended[STOCK] = _finish(procs[STOCK])
        out[engine] = ended
    return out


def _alive_at_finalization(proc: subprocess.CompletedProcess) -> list[str] | None:
    """The output threads the runner found alive as its interpreter began to finalize."""
    found = [line.split(EXIT_LINE, 1)[1] for line in proc.stderr.splitlines() if EXIT_LINE in line]
    return json.loads(found[-1]) if found else None


@pytest.mark.parametrize("device", DEVICES_HERE)
@pytest.mark.parametrize("engine", ENGINES)
def test_every_template_runner_exits_cleanly(runs, engine: str, device: str) -> None:
    """A runner's exit is a test of its own: a crash at exit fails here, not the answers it
    printed. Each runner's output thread woke late from its stop signal, so only a main
    thread that waits for it (patch client_threads_end_before_the_interpreter) finds it
    ended before finalization - the path taken, which an exit status alone can hide."""
    proc = runs[engine][device]
    where = f"template {engine} runner on {device}, exit {proc.returncode}:\n{proc.stderr[-5000:]}"
    assert proc.returncode == 0, where
    assert _alive_at_finalization(proc) == [], where


def test_stock_leaves_its_output_thread_to_the_finalizing_interpreter(runs) -> None:
    """The reference that the patch is still needed: stock vLLM's pooling runner exits
    (0, or vLLM's known exit abort after a complete answer: tests/engine_exit.py) with its
    output thread still alive at finalization, where freeing its tensors aborts."""
    for engine in ENGINES:
        proc = runs[engine][STOCK]
        if proc is None:  # stopped: the template refused the engine
            continue
        assert proc.returncode == 0 or stock_exit_abort(["--stock"], proc), proc.stderr[-5000:]
    pooling = runs["pooling"][STOCK]
    assert _alive_at_finalization(pooling) == [OUTPUT_THREAD], (
        "stock vLLM's output thread ended before finalization: vLLM may now wait for it "
        "(the patch's remove_when)\n" + pooling.stderr[-5000:]
    )


def _answer(runs: dict, engine: str, device: str) -> dict[str, Any]:
    """The report a runner printed, whatever its exit status (the exit tests judge that)."""
    proc = runs[engine][device]
    assert proc is not None, f"the {device} {engine} runner was stopped"
    report = _printed(proc)
    if report is None:
        pytest.fail(f"the {device} {engine} runner printed no answer:\n{proc.stderr[-5000:]}")
    return report


class Refused(Exception):
    """The template refused the feature at config time (its cell says why)."""


def _reports(runs: dict, engine: str, device: str, record_property) -> tuple[dict, dict, bool]:
    """The template's and stock's reports and whether stock ran on the template's device.

    Where the template refused the engine: a config check must have refused it, with its
    reason as the cell, and the test ends there (:class:`Refused`)."""
    ours = _answer(runs, engine, device)
    expected = PLATFORM_QUALNAMES[device].rsplit(".", 1)[1]
    assert ours["platform"] == expected, ours
    if "refused" in ours:
        assert ours["refused_at"] == "config", f"the {device} engine died at start: {ours}"
        reason = ours["refused"].split("Value error, ", 1)[-1].split(" was asked for", 1)[0]
        record_property("matrix", f"refused at config time: {reason.splitlines()[0][:160]}")
        raise Refused(reason)
    stock = _answer(runs, engine, STOCK)
    assert stock["platform"] != expected, stock
    assert "refused" not in stock, f"stock refused what the template ran: {stock['refused']}"
    return ours, stock, ours["device_type"] == stock["device_type"]


@pytest.fixture
def reports(runs, device: str, record_property):
    def of(engine: str) -> tuple[dict, dict, bool]:
        return _reports(runs, engine, device, record_property)

    return of


@pytest.fixture(params=DEVICES_HERE)
def device(request) -> str:
    return request.param


def _unless_refused(test):
    """A test whose feature the template refuses passes with the refusal as its cell."""

    @functools.wraps(test)
    def run(*args: Any, **kwargs: Any) -> None:
        try:
            test(*args, **kwargs)
        except Refused:
            return

    return run


@pytest.mark.feature("structured output")
@_unless_refused
def test_structured_output(reports) -> None:
    ours, stock, _ = reports("generate")
    for key in ("structured_json", "structured_regex", "structured_choice"):
        assert ours[key] == stock[key], key
    # the schema's object, begun (the tiny model pads it with the whitespace JSON allows,
    # so 48 tokens may end before the closing brace)
    text = ours["structured_json"]
    assert text.lstrip().startswith("{") and '"name"' in text
    assert ours["structured_choice"] in ("Bennet", "Darcy", "Bingley")


@pytest.mark.feature("prefix caching")
@_unless_refused
def test_prefix_caching(reports) -> None:
    ours, stock, _ = reports("generate")
    assert ours["prefix_caching"] == stock["prefix_caching"]
    cached = ours["prefix_caching"]
    assert cached["cached_first"] == 0 and cached["cached_again"] >= 256 and cached["same_tokens"]


@pytest.mark.feature("chunked prefill")
@_unless_refused
def test_chunked_prefill(reports) -> None:
    ours, stock, _ = reports("generate")
    chunked = ours["chunked_prefill"]
    assert chunked == stock["chunked_prefill"] and len(chunked["tokens"]) == 16
    # the prompt was prefilled in chunks: longer than the scheduler's budget for one step,
    # with chunking on, as the platform's config left them (a platform may turn them off)
    assert chunked["enabled"] and chunked["budget"] == CHUNK_BUDGET < chunked["prompt_tokens"]


@pytest.mark.feature("prompt logprobs")
@_unless_refused
def test_prompt_logprobs(reports) -> None:
    ours, stock, _ = reports("generate")
    logprobs = ours["prompt_logprobs"]
    assert logprobs == stock["prompt_logprobs"]
    assert logprobs[0] is None and all(entry for entry in logprobs[1:])


@pytest.mark.feature("n>1 seeded sampling")
@_unless_refused
def test_n2_seeded_sampling(reports) -> None:
    ours, stock, same_device = reports("generate")
    sampled = ours["n2_seeded"]
    assert ours["n2_seeded_again"] == sampled  # the seed decides the answer
    assert len(sampled) == 2 and sampled[0] != sampled[1]
    if same_device:  # the same generator as stock's: the same samples
        assert sampled == stock["n2_seeded"]


@pytest.mark.feature("stop strings")
@_unless_refused
def test_stop_strings(reports) -> None:
    ours, stock, _ = reports("generate")
    stopped = ours["stop_strings"]
    assert stopped == stock["stop_strings"]
    assert stopped["finish_reason"] == "stop" and "," not in stopped["text"]


def _speculation(reports, engine: str, hf_greedy) -> tuple[int, int]:
    """Tokens and acceptance counts equal stock's, tokens equal transformers' greedy ones
    (speculation changes no greedy token); the accepted and drafted counts."""
    ours, stock, _ = reports(engine)
    assert ours["spec_tokens"] == stock["spec_tokens"]
    assert ours["spec_tokens"] == hf_greedy(ours["spec_prompt_ids"], 32)
    metrics = ours["spec_decode_metrics"]
    assert metrics == stock["spec_decode_metrics"] and metrics["vllm:spec_decode_num_drafts"] > 0
    accepted = metrics["vllm:spec_decode_num_accepted_tokens"]
    drafted = metrics["vllm:spec_decode_num_draft_tokens"]
    print(f"{engine}: {accepted}/{drafted} draft tokens accepted (stock the same)")
    return accepted, drafted


@pytest.mark.feature("speculative decoding (ngram)")
@_unless_refused
def test_ngram_speculative_decoding(reports, hf_greedy) -> None:
    _speculation(reports, "ngram", hf_greedy)


@pytest.mark.feature("speculative decoding (draft model)")
@_unless_refused
def test_draft_model_speculative_decoding(reports, hf_greedy) -> None:
    """The draft model ran: its proposals are accepted (tokens drawn at random from a
    2048-token vocabulary would almost never be)."""
    accepted, drafted = _speculation(reports, "draft", hf_greedy)
    assert 0 < accepted <= drafted


@pytest.mark.feature("embeddings (pooling)")
@_unless_refused
def test_embeddings(reports) -> None:
    ours, stock, same_device = reports("pooling")
    vectors, reference = ours["embeddings"], stock["embeddings"]
    assert len(vectors) == 2 and vectors[0] != vectors[1]
    if same_device:
        assert vectors == reference
    else:
        assert [len(v) for v in vectors] == [len(r) for r in reference]
        pairs = zip(vectors, reference, strict=True)
        worst = max(abs(a - b) for v, r in pairs for a, b in zip(v, r, strict=True))
        assert worst <= VECTOR_TOLERANCE, worst


@pytest.mark.feature("KV-cache offload")
@_unless_refused
def test_kv_offload_reloads_an_evicted_prompt(reports) -> None:
    """An evicted prompt's blocks come back from host memory: its tokens again, counted
    as cached, equal stock's."""
    ours, stock, _ = reports("offload")
    offload = ours["offload"]
    assert offload == stock["offload"]
    assert offload["tokens"][0] == offload["tokens"][1] and offload["cached_again"] >= 256


@pytest.fixture(scope="module")
def hf_model(tiny_model_dir: Path) -> Any:
    """The embedded model in transformers (fp32, CPU): the classifier's reference."""
    import torch
    from transformers import AutoModelForCausalLM

    return AutoModelForCausalLM.from_pretrained(tiny_model_dir, dtype=torch.float32).eval()


@pytest.mark.feature("classification and scoring")
@_unless_refused
def test_classification_and_scoring(reports, hf_model) -> None:
    """Class probabilities and scores within :data:`VECTOR_TOLERANCE` of stock's (a
    pooler's float, not a token), and the classifier is what it names: at each prompt's
    last token, transformers' softmax over the LM head's ``No`` and ``Yes`` logits."""
    import torch

    ours, stock, _ = reports("classify")
    found = [*(p for probs in ours["classify"] for p in probs), *ours["score"]]
    reference = [*(p for probs in stock["classify"] for p in probs), *stock["score"]]
    assert len(found) == len(reference) == 4, (ours, stock)
    worst = max(abs(a - b) for a, b in zip(found, reference, strict=True))
    assert worst <= VECTOR_TOLERANCE, (found, reference)
    assert all(0 < score < 1 for score in ours["score"])
    labels = ours["classifier_token_ids"]
    with torch.no_grad():
        for ids, probs in zip(ours["classify_prompt_ids"], ours["classify"], strict=True):
            logits = hf_model(torch.tensor([ids])).logits[0, -1, labels]
            expected = torch.softmax(logits, dim=0)[1].item()
            assert len(probs) == 1 and abs(probs[0] - expected) <= VECTOR_TOLERANCE, (
                probs,
                expected,
            )


@pytest.fixture(scope="module")
def hf_image_greedy() -> list[list[int]]:
    """transformers' 16 greedy tokens of the runner's prompt with each of its two images
    (``tiny-blip2``, fp32, CPU; the checkpoint's own processor)."""
    import torch
    from transformers import Blip2ForConditionalGeneration, Blip2Processor

    from vllm_platform_template_tools.embedded_model import default_cache_dir
    from vllm_platform_template_tools.embedded_model.vision_language import (
        ensure_vision_language_model,
    )

    model_dir = ensure_vision_language_model(default_cache_dir())
    model = Blip2ForConditionalGeneration.from_pretrained(model_dir, dtype=torch.float32).eval()
    processor = Blip2Processor.from_pretrained(model_dir)
    tokens = []
    for image in images():
        inputs = processor(images=image, text=PROMPT, return_tensors="pt")
        out = model.generate(**inputs, max_new_tokens=16, do_sample=False)
        tokens.append(out[0, inputs["input_ids"].shape[1] :].tolist())
    return tokens


@pytest.mark.feature("image input (multimodal)")
@_unless_refused
def test_image_requests_equal_stock_and_transformers(reports, hf_image_greedy) -> None:
    """Each image's prompt (the Q-Former's tokens, then the text) is answered as stock and
    transformers answer it; the image is read: two images, two answers, neither the
    answer without one. The vision encoder ran through vLLM's ``MMEncoderAttention``."""
    ours, stock, _ = reports("multimodal")
    assert ours["image_prompt_ids"] == stock["image_prompt_ids"]
    assert ours["image_tokens"] == stock["image_tokens"]
    first, second, without = ours["image_tokens"]
    assert [first, second] == hf_image_greedy
    assert first != second and without not in (first, second)
    assert ours["encoder_attention"] and ours["encoder_attention"] == stock["encoder_attention"]


@pytest.mark.feature("sleep mode")
def test_sleep_mode_is_refused_as_stock_refuses_it(runs, device: str, record_property) -> None:
    ours, stock = (_answer(runs, "sleep", d) for d in (device, STOCK))
    assert "refused" in stock, "stock vLLM runs sleep mode here now: test it on the template"
    assert ours.get("refused") == stock["refused"] and ours["refused_at"] == "config"
    assert "Sleep mode is not supported on current platform" in ours["refused"]
    same = f"stock's {stock['platform']} the same"
    record_property("matrix", f"refused: vLLM finds no sleep mode on the platform ({same})")


@pytest.mark.feature("LoRA")
@_unless_refused
def test_lora_runs_on_the_platforms_punica_wrapper(reports, device: str) -> None:
    """The path taken: vLLM wrapped the model's projections in its LoRA layers and runs
    them on the punica wrapper the device folder names (``Platform.get_punica_wrapper``),
    inside the template's graphs where the platform's graph mode records any (the test
    device's FULL decode graphs)."""
    ours, _, _ = reports("lora")
    print(f"LoRA on {device}: graph mode {ours['graph_mode']}, {ours['graph_replays']} replays")
    if ours["graph_mode"] != "NONE":
        assert ours["graph_replays"] > 0, ours["graph_mode"]
    module, name = PLATFORM_QUALNAMES[device].rsplit(".", 1)
    named = getattr(importlib.import_module(module), name).get_punica_wrapper()
    assert ours["punica_wrapper"] == [named]
    assert {"MergedQKVParallelLinearWithLoRA", "LogitsProcessorWithLoRA"} <= set(
        ours["lora_layers"]
    )


@pytest.mark.feature("LoRA")
@_unless_refused
def test_lora_adapters_change_the_answer_and_equal_stocks(reports) -> None:
    ours, stock, _ = reports("lora")
    base, first, second = ours["lora_alone"]
    assert first != base and second != base and first != second
    assert ours["lora_alone"] == stock["lora_alone"]
    # the adapter rows of the mixed batch (rows 2-5) and the swapped adapters
    assert ours["lora_mixed"][2:] == stock["lora_mixed"][2:]
    assert ours["lora_swapped"] == stock["lora_swapped"]


@pytest.mark.feature("LoRA")
@_unless_refused
def test_a_lora_batch_does_not_change_any_request_s_answer(reports, record_property) -> None:
    """Requests without an adapter batched beside LoRA requests keep the base model's
    tokens. vLLM 0.32's torch punica ops give them the last adapter slot's delta (slot -1;
    vllm-project/vllm PRs #48421, #49656): stock's answer for them is reported, not
    required, and the cell says so only where this run saw it."""
    ours, stock, _ = reports("lora")
    base, first, second = ours["lora_alone"]
    assert ours["lora_mixed"] == [*base, *first, *second]
    assert ours["lora_swapped"] == [second[0], first[1]]
    if stock["lora_mixed"][:2] != base:
        record_property("matrix", "passed (stock: base requests batched with LoRA ones wrong)")
        print(
            "stock vLLM gives the requests without an adapter another answer in a mixed "
            f"batch: {stock['lora_mixed'][:2]} (alone: {base}); its punica ops read slot -1 "
            "as the last adapter (vllm-project/vllm#48421)"
        )
