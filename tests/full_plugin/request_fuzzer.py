"""Generated bad (and odd) requests for vLLM's OpenAI server, seeded and reproducible.

``cases(seed, count)`` mutates well-formed completion and chat bodies one fault at a
time, drawn from :data:`CLASSES`: wrong types, missing and unknown fields, negative /
huge / NaN / infinite numbers, empty and enormous prompts, invalid UTF-8, bad token
ids, conflicting sampling options, truncated bodies. ``send(url, cases)`` posts each
and records the status and vLLM's error type; every ``BATCH`` cases it sends one
well-formed request and keeps its answer, so a caller can check the server still
answers as before. ``test_openai_client.py`` runs the same cases against stock vLLM's
server and the template's and compares them.

    python tests/full_plugin/request_fuzzer.py URL [--seed 0] [--count 1000]   # by hand
"""

from __future__ import annotations

import argparse
import json
import math
import random
import time
from collections import Counter
from dataclasses import dataclass
from typing import Any

import httpx

MODEL = "tiny"
BATCH = 50
COMPLETION = {"model": MODEL, "prompt": "It is a truth universally acknowledged,",
              "max_tokens": 4, "temperature": 0.0}  # fmt: skip
CHAT = {"model": MODEL, "messages": [{"role": "user", "content": "Elizabeth walked on"}],
        "max_tokens": 4, "temperature": 0.0}  # fmt: skip
WELL_FORMED = dict(COMPLETION, max_tokens=8)
NUMERIC_FIELDS = ("max_tokens", "temperature", "top_p", "top_k", "n", "logprobs", "seed",
                  "presence_penalty", "frequency_penalty", "repetition_penalty", "min_tokens",
                  "min_p", "prompt_logprobs")  # fmt: skip
ODD_NUMBERS: tuple[Any, ...] = (-1, -(2**31), 2**31, 2**63, 10**30, 0, 1e308, -1e-9, 0.5,
                                math.nan, math.inf, -math.inf)  # fmt: skip
WRONG_TYPES: tuple[Any, ...] = ("4", "", None, True, [], {}, [1, 2], {"a": 1}, 3.7)


@dataclass(frozen=True)
class Case:
    """One request: its class, endpoint, raw body bytes and a short description."""

    kind: str
    path: str
    body: bytes
    what: str


def _dump(body: Any) -> bytes:
    # allow_nan: NaN and Infinity go out as JSON5-style literals, as a careless client
    # (or json.dumps' default) would send them
    return json.dumps(body, allow_nan=True).encode()


def _base(rng: random.Random) -> tuple[str, dict[str, Any]]:
    if rng.random() < 0.75:
        return "/v1/completions", dict(COMPLETION)
    return "/v1/chat/completions", json.loads(json.dumps(CHAT))


def _wrong_type(rng: random.Random) -> Case:
    path, body = _base(rng)
    field = rng.choice(["model", "prompt" if "prompt" in body else "messages", "stream",
                        "stop", *rng.sample(NUMERIC_FIELDS, 3)])  # fmt: skip
    body[field] = rng.choice(WRONG_TYPES)
    return Case("wrong type", path, _dump(body), f"{field}={body[field]!r}")


def _missing_field(rng: random.Random) -> Case:
    path, body = _base(rng)
    field = rng.choice(list(body))
    del body[field]
    return Case("missing field", path, _dump(body), f"no {field}")


def _unknown_field(rng: random.Random) -> Case:
    path, body = _base(rng)
    name = rng.choice(["frobnicate", "max_token", "temprature", "__proto__", "", "x" * 300])
    body[name] = rng.choice([1, "yes", None, {"nested": [1]}])
    return Case("unknown field", path, _dump(body), f"{name[:20]}={body[name]!r}")


def _odd_number(rng: random.Random) -> Case:
    path, body = _base(rng)
    field = rng.choice(NUMERIC_FIELDS)
    body[field] = rng.choice(ODD_NUMBERS)
    return Case("odd number", path, _dump(body), f"{field}={body[field]!r}")


def _prompt_size(rng: random.Random) -> Case:
    path, body = _base(rng)
    size = rng.choice([0, 0, 1, 5000, 200_000])
    text = "" if size == 0 else ("Elizabeth " * (size // 10 + 1))[:size]
    if "prompt" in body:
        body["prompt"] = text if rng.random() < 0.7 else [text, ""]
    else:
        body["messages"] = [{"role": "user", "content": text}]
    return Case("prompt size", path, _dump(body), f"{size} characters")


def _invalid_utf8(rng: random.Random) -> Case:
    path, body = _base(rng)
    raw = _dump(body)
    bad = rng.choice([b"\xff\xfe", b"\xc3\x28", b"\xed\xa0\x80", b"\xf8\x88\x80\x80\x80"])
    text = b"universally" if b"universally" in raw else b"Elizabeth"
    return Case("invalid utf-8", path, raw.replace(text, text + bad), f"{bad!r} in the text")


def _token_ids(rng: random.Random) -> Case:
    body = dict(COMPLETION)
    body["prompt"] = rng.choice([
        [-1, 5, 6], [10**9], [2**63], [], [[1, 2], [-5]], [1.5, 2], ["a", 1], [[]],
        list(range(3000)),
    ])  # fmt: skip
    return Case("token ids", "/v1/completions", _dump(body), f"prompt={str(body['prompt'])[:40]}")


def _conflicting(rng: random.Random) -> Case:
    path, body = _base(rng)
    conflict = rng.choice([
        {"n": 3, "best_of": 2}, {"use_beam_search": True, "n": 1, "temperature": 0.5},
        {"n": 2, "temperature": 0.0}, {"min_tokens": 10, "max_tokens": 2},
        {"logprobs": 30}, {"top_logprobs": 5, "logprobs": False}, {"echo": True, "max_tokens": 0},
        {"stream": False, "stream_options": {"include_usage": True}},
        {"response_format": {"type": "json_schema"}}, {"stop": ["a"] * 100},
        {"logit_bias": {"not-a-token": 5}}, {"logit_bias": {"5": 1000}},
        {"prompt_logprobs": -2}, {"max_tokens": 600},
    ])  # fmt: skip
    body.update(conflict)
    return Case("conflicting options", path, _dump(body), json.dumps(conflict)[:60])


def _truncated(rng: random.Random) -> Case:
    path, body = _base(rng)
    raw = _dump(body)
    cut = rng.randrange(0, len(raw))
    return Case("truncated body", path, raw[:cut], f"first {cut} of {len(raw)} bytes")


CLASSES = (_wrong_type, _missing_field, _unknown_field, _odd_number, _prompt_size,
           _invalid_utf8, _token_ids, _conflicting, _truncated)  # fmt: skip


def cases(seed: int, count: int) -> list[Case]:
    """``count`` cases, every class in turn, each drawn from ``random.Random(seed)``."""
    rng = random.Random(seed)
    return [CLASSES[i % len(CLASSES)](rng) for i in range(count)]


def _error_type(response: httpx.Response) -> str:
    try:
        error = response.json().get("error", {})
    except (ValueError, AttributeError):
        return "-"
    return str(error.get("type", "-")) if isinstance(error, dict) else "-"


def well_formed_answer(client: httpx.Client, url: str) -> tuple[int, str]:
    """The status and text of one greedy well-formed completion."""
    response = client.post(f"{url}/v1/completions", json=WELL_FORMED)
    text = response.json()["choices"][0]["text"] if response.status_code == 200 else ""
    return response.status_code, text


def send(url: str, batch: list[Case], timeout_s: float = 60) -> dict[str, Any]:
    """Every case's status and error type; after each ``BATCH`` cases, a well-formed answer."""
    results: list[dict[str, Any]] = []
    checks: list[tuple[int, str]] = []
    begin = time.monotonic()
    with httpx.Client(timeout=timeout_s) as client:
        for i, case in enumerate(batch):
            try:
                response = client.post(
                    f"{url}{case.path}",
                    content=case.body,
                    headers={"content-type": "application/json"},
                )
                status, error = response.status_code, _error_type(response)
            except httpx.HTTPError as exc:  # the server dropped the connection or hung
                status, error = 0, type(exc).__name__
            results.append({"kind": case.kind, "what": case.what, "status": status, "error": error})
            if (i + 1) % BATCH == 0 or i + 1 == len(batch):
                checks.append(well_formed_answer(client, url))
    return {"results": results, "checks": checks, "seconds": time.monotonic() - begin}


def summary(results: list[dict[str, Any]]) -> dict[str, dict[int, int]]:
    """Per class, how many requests got each status."""
    table: dict[str, Counter] = {}
    for r in results:
        table.setdefault(r["kind"], Counter())[r["status"]] += 1
    return {kind: dict(sorted(c.items())) for kind, c in table.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("url")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--count", type=int, default=1000)
    args = parser.parse_args()
    sent = send(args.url, cases(args.seed, args.count))
    print(json.dumps({"summary": summary(sent["results"]), "checks": sent["checks"],
                      "seconds": round(sent["seconds"], 1)}, indent=1))  # fmt: skip


if __name__ == "__main__":
    main()
