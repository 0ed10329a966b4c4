"""The ``openai`` Python client against ``vllm-template serve`` and stock vLLM's server.

The same embedded model (fp32, greedy) behind both; stock vLLM CPU is the same
``serve`` with the plugin not loaded (``VLLM_PLUGINS=none``). Both servers start side
by side; stock answers every request of :data:`CASES` and the bad requests, then
stops; the template server then answers the same, and each answer must equal
stock's token for token (completions and chat, streaming and not, ``n=2``,
``logprobs``, stop strings, ``max_tokens``), each bad request (negative or huge
``max_tokens``, a prompt longer than the context, malformed JSON, an unknown
model) must get stock's 4xx status, and the server must still serve after them.
Then ``FUZZ_REQUESTS`` generated bad and odd requests (``request_fuzzer.py``, seeded:
wrong types, missing and unknown fields, odd numbers, empty and enormous prompts,
invalid UTF-8, bad token ids, conflicting options, truncated bodies; 300 here,
``tox -e fuzz``: 1000) must get stock's status and error type each, never a 5xx, and a
well-formed request after every 50 must still get stock's answer.
Last, SIGTERM with 16 streams in flight stops the template server within 10 s.
The two starts overlap (each costs 30-80 s on a 2-core host, mostly one process's
imports and warm-up); the requests go to one server at a time; loopback only.
"""

from __future__ import annotations

import math
import os
import signal
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest
import request_fuzzer
from serving import (
    Server,
    check_stops_with_streams_in_flight,
    launch_server,
    stop_server,
    wait_healthy,
)

pytestmark = pytest.mark.e2e

MODEL = "tiny"
PROMPT = "It is a truth universally acknowledged,"
CHAT = [{"role": "user", "content": "Elizabeth walked on"}]
LOGPROB_REL = 1e-4  # fp32 on both sides
FUZZ_SEED = int(os.environ.get("FUZZ_SEED", "0"))
FUZZ_REQUESTS = int(os.environ.get("FUZZ_REQUESTS", "300"))


def _text(resp: Any) -> list[Any]:
    return [(c.text, c.finish_reason) for c in resp.choices]


def _chat(resp: Any) -> list[Any]:
    return [(c.message.content, c.finish_reason) for c in resp.choices]


def _stream_text(chunks: Any) -> list[Any]:
    texts: dict[int, str] = {}
    finish: dict[int, Any] = {}
    for chunk in chunks:
        for c in chunk.choices:
            texts[c.index] = texts.get(c.index, "") + (c.text or "")
            finish[c.index] = c.finish_reason or finish.get(c.index)
    return [(texts[i], finish[i]) for i in sorted(texts)]


def _stream_chat(chunks: Any) -> list[Any]:
    texts: dict[int, str] = {}
    finish: dict[int, Any] = {}
    for chunk in chunks:
        for c in chunk.choices:
            texts[c.index] = texts.get(c.index, "") + (c.delta.content or "")
            finish[c.index] = c.finish_reason or finish.get(c.index)
    return [(texts[i], finish[i]) for i in sorted(texts)]


def _logprobs(resp: Any) -> list[Any]:
    lp = resp.choices[0].logprobs
    return [
        (tok, round(val, 12), sorted(top.items()))
        for tok, val, top in zip(lp.tokens, lp.token_logprobs, lp.top_logprobs, strict=True)
    ]


GREEDY = {"temperature": 0.0}
# vLLM refuses n > 1 with greedy decoding: seeded sampling (its per-request generator)
# gives the same draws on both servers from the same fp32 logits.
SEEDED = {"temperature": 0.8, "seed": 1234}
IDS = {"extra_body": {"return_token_ids": True}}

# name -> (call on an openai.OpenAI client, what of the answer must equal stock's)
CASES: dict[str, tuple[Callable[[openai.OpenAI], Any], Callable[[Any], Any]]] = {
    "completion": (
        lambda c: c.completions.create(model=MODEL, prompt=PROMPT, max_tokens=24, **GREEDY, **IDS),
        lambda r: (_text(r), [ch.token_ids for ch in r.choices], r.usage.completion_tokens),
    ),
    "completion_stream": (
        lambda c: list(
            c.completions.create(model=MODEL, prompt=PROMPT, max_tokens=24, stream=True, **GREEDY)
        ),
        _stream_text,
    ),
    "completion_n2": (
        lambda c: c.completions.create(
            model=MODEL, prompt=PROMPT, max_tokens=16, n=2, **SEEDED, **IDS
        ),
        lambda r: (_text(r), [ch.token_ids for ch in r.choices]),
    ),
    "completion_n2_stream": (
        lambda c: list(
            c.completions.create(
                model=MODEL, prompt=PROMPT, max_tokens=16, n=2, stream=True, **SEEDED
            )
        ),
        _stream_text,
    ),
    "completion_logprobs": (
        lambda c: c.completions.create(
            model=MODEL, prompt=PROMPT, max_tokens=8, logprobs=3, **GREEDY
        ),
        _logprobs,
    ),
    "completion_stop": (
        lambda c: c.completions.create(
            model=MODEL, prompt=PROMPT, max_tokens=64, stop=[","], **GREEDY
        ),
        _text,
    ),
    "completion_max_tokens": (
        lambda c: c.completions.create(model=MODEL, prompt=PROMPT, max_tokens=3, **GREEDY),
        lambda r: (_text(r), r.usage.completion_tokens),
    ),
    "chat": (
        lambda c: c.chat.completions.create(model=MODEL, messages=CHAT, max_tokens=24, **GREEDY),
        lambda r: (_chat(r), r.usage.completion_tokens),
    ),
    "chat_stream": (
        lambda c: list(
            c.chat.completions.create(
                model=MODEL, messages=CHAT, max_tokens=24, stream=True, **GREEDY
            )
        ),
        _stream_chat,
    ),
    "chat_n2_logprobs_stop": (
        lambda c: c.chat.completions.create(
            model=MODEL,
            messages=CHAT,
            max_tokens=32,
            n=2,
            logprobs=True,
            top_logprobs=2,
            stop=["."],
            **SEEDED,
        ),
        lambda r: (
            _chat(r),
            [
                [(t.token, round(t.logprob, 12), [x.token for x in t.top_logprobs]) for t in ch]
                for ch in (c.logprobs.content for c in r.choices)
            ],
        ),
    ),
}


def _bad_requests(url: str) -> dict[str, int]:
    """Status of each bad request; the body's error type must be vLLM's."""
    long_prompt = " ".join(["Elizabeth"] * 2000)  # far over --max-model-len 512
    bodies: dict[str, Any] = {
        "negative_max_tokens": {"model": MODEL, "prompt": PROMPT, "max_tokens": -1},
        "huge_max_tokens": {"model": MODEL, "prompt": PROMPT, "max_tokens": 10**9},
        "prompt_longer_than_context": {"model": MODEL, "prompt": long_prompt, "max_tokens": 4},
        "unknown_model": {"model": "no-such-model", "prompt": PROMPT, "max_tokens": 4},
    }
    statuses = {}
    with httpx.Client(timeout=60) as client:
        for name, body in bodies.items():
            response = client.post(f"{url}/v1/completions", json=body)
            statuses[name] = response.status_code
            assert "error" in response.json(), (name, response.text)
        response = client.post(
            f"{url}/v1/completions",
            content=b'{"model": "tiny", "prompt": ',
            headers={"content-type": "application/json"},
        )
        statuses["malformed_json"] = response.status_code
    return statuses


def _answers(server: Server) -> dict[str, Any]:
    client = openai.OpenAI(base_url=f"{server.url}/v1", api_key="unused", max_retries=0)
    answers = {name: key(call(client)) for name, (call, key) in CASES.items()}
    answers["_bad"] = _bad_requests(server.url)
    answers["_fuzz"] = request_fuzzer.send(
        server.url, request_fuzzer.cases(FUZZ_SEED, FUZZ_REQUESTS)
    )
    answers["_after_bad"] = CASES["completion"][1](CASES["completion"][0](client))
    return answers


@pytest.fixture(scope="module")
def servers(tiny_model_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Server]:
    """Stock's and the template's servers, started side by side (each start is mostly
    one process's imports and warm-up: two fit the machine's cores)."""
    started = {
        "stock": launch_server(
            tiny_model_dir, "cpu", tmp_path_factory.mktemp("stock-serve") / "server.log",
            env_overrides={"VLLM_PLUGINS": "none"},
        ),
        "template": launch_server(
            tiny_model_dir, "cpu", tmp_path_factory.mktemp("template-serve") / "server.log"
        ),
    }  # fmt: skip
    try:
        return {who: wait_healthy(server) for who, server in started.items()}
    except BaseException:
        for server in started.values():
            stop_server(server)
        raise


@pytest.fixture(scope="module")
def stock_answers(servers: dict[str, Server]) -> dict:
    server = servers["stock"]
    try:
        assert "TemplateCpuPlatform" not in server.log.read_text()
        return _answers(server)
    finally:
        stop_server(server)


@pytest.fixture(scope="module")
def template_server(stock_answers: dict, servers: dict[str, Server]) -> Iterator[Server]:
    server = servers["template"]
    yield server
    stop_server(server)


@pytest.fixture(scope="module")
def template_answers(template_server: Server) -> dict:
    return _answers(template_server)


@pytest.mark.parametrize("case", list(CASES))
def test_answer_equals_stock_token_for_token(case: str, stock_answers, template_answers) -> None:
    ours, stock = template_answers[case], stock_answers[case]
    assert _close(ours, stock), f"{case}:\ntemplate {ours}\nstock    {stock}"


def _close(a: Any, b: Any) -> bool:
    """Equal, floats within LOGPROB_REL (fp32 logprobs of two kernel sets)."""
    if isinstance(a, float) and isinstance(b, float):
        return math.isclose(a, b, rel_tol=LOGPROB_REL, abs_tol=1e-6)
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return len(a) == len(b) and all(_close(x, y) for x, y in zip(a, b, strict=True))
    return a == b


def test_the_answers_are_what_was_asked(template_answers) -> None:
    """The cases exercise what they name (so equal answers mean something)."""
    answer = template_answers["completion"]
    (text, finish), token_ids = answer[0][0], answer[1]
    assert text and len(token_ids[0]) == 24 and finish == "length"
    n2_texts = template_answers["completion_n2"][0]
    assert len(n2_texts) == 2 and all(text for text, _ in n2_texts)
    assert len(template_answers["completion_n2_stream"]) == 2
    assert all(len(top) == 3 for _, _, top in template_answers["completion_logprobs"])
    ((stop_text, stop_reason),) = template_answers["completion_stop"]
    assert stop_reason == "stop" and "," not in stop_text
    assert template_answers["completion_max_tokens"][1] == 3
    assert template_answers["completion_stream"][0][0] == text
    chat_text = template_answers["chat"][0][0][0]
    assert chat_text and template_answers["chat_stream"][0][0] == chat_text
    choices, logprobs = template_answers["chat_n2_logprobs_stop"]
    assert len(choices) == 2 and all("." not in t for t, _ in choices) and logprobs[0]


def test_bad_requests_get_vllms_4xx_and_the_server_serves_on(
    stock_answers, template_answers, template_server: Server
) -> None:
    ours, stock = template_answers["_bad"], stock_answers["_bad"]
    assert ours == stock, f"template {ours}, stock {stock}"
    assert all(400 <= status < 500 for status in ours.values()), ours
    assert template_answers["_after_bad"] == template_answers["completion"]
    assert httpx.get(f"{template_server.url}/health", timeout=10).status_code == 200


def test_fuzzed_requests_get_stocks_statuses_and_the_server_serves_on(
    stock_answers, template_answers
) -> None:
    ours, stock = template_answers["_fuzz"], stock_answers["_fuzz"]
    assert len(ours["results"]) == FUZZ_REQUESTS
    differences = [
        f"{o['kind']} ({o['what']}): template {o['status']} {o['error']}, "
        f"stock {s['status']} {s['error']}"
        for o, s in zip(ours["results"], stock["results"], strict=True)
        if (o["status"], o["error"]) != (s["status"], s["error"])
    ]
    print(f"fuzz (seed {FUZZ_SEED}): {request_fuzzer.summary(ours['results'])}; template "
          f"{ours['seconds']:.1f} s, stock {stock['seconds']:.1f} s")  # fmt: skip
    assert not differences, "\n".join(differences[:20])
    failed = [r for r in ours["results"] if r["status"] >= 500 or r["status"] == 0]
    assert not failed, failed[:10]
    # the cases reach both outcomes: accepted and refused requests
    assert {200, 400} <= {r["status"] for r in ours["results"]}
    assert ours["checks"] == stock["checks"]
    assert {status for status, _ in ours["checks"]} == {200}


def test_sigterm_with_streams_in_flight_stops_at_once(template_server: Server, template_answers):
    check_stops_with_streams_in_flight(template_server, signal.SIGTERM)
