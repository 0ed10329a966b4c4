"""Token parity of the template platform with stock vLLM and with transformers.

Greedy decoding of the tiny fp32 model (the demo's: with vLLM's repetition
penalty) must give the same token ids on the template platform (eager and
compiled) as on stock vLLM's CPU platform (plugin inactive, separate process)
and as transformers' own greedy decoding with the same penalty.
"""

from __future__ import annotations

import pytest
from hf_reference import decoding_of

from vllm_platform_template.devices.cpu.vllm_cpu_build import ISA_ENV as CPU_ISA_ENV
from vllm_platform_template_tools.cli.demo import DEFAULT_REPETITION_PENALTY

pytestmark = pytest.mark.e2e

TEMPLATE_CPU = "vllm_platform_template.devices.cpu.platform.TemplateCpuPlatform"
STOCK_CPU = "vllm.platforms.cpu.CpuPlatform"


def test_eager_matches_stock(engine_runs) -> None:
    stock = engine_runs.run("--stock", "--enforce-eager")
    ours = engine_runs.run("--enforce-eager")
    assert stock["platform"] == STOCK_CPU
    assert ours["platform"] == TEMPLATE_CPU
    assert ours["compilation_mode"] == "NONE"
    assert ours["tokens"] == stock["tokens"]
    assert all(len(t) == 32 for t in ours["tokens"])
    assert ours["sampling"]["repetition_penalty"] == DEFAULT_REPETITION_PENALTY


def test_compiled_matches_stock(engine_runs) -> None:
    stock = engine_runs.run("--stock")
    ours = engine_runs.run()
    assert ours["platform"] == TEMPLATE_CPU
    assert ours["compilation_mode"] == "VLLM_COMPILE"
    assert ours["compile_backend"] == "vllm_platform_template.compiler.TemplateCompiler"
    assert ours["tokens"] == stock["tokens"]


@pytest.mark.parametrize("extra", [("--enforce-eager",), ()], ids=["eager", "compiled"])
def test_matches_transformers(engine_runs, hf_greedy, extra: tuple[str, ...]) -> None:
    ours = engine_runs.run(*extra)
    expected = hf_greedy(ours["prompt_token_ids"], **decoding_of(ours))
    assert ours["tokens"] == expected


def test_no_shutdown_traceback(engine_runs) -> None:
    ours = engine_runs.run("--enforce-eager")
    assert "Traceback" not in ours["_stderr"]


def _repeated_4grams(tokens: list[int]) -> list[tuple[int, ...]]:
    grams = [tuple(tokens[i : i + 4]) for i in range(len(tokens) - 3)]
    return sorted({g for g in grams if grams.count(g) > 1})


def test_demo_continuations_do_not_loop(engine_runs) -> None:
    """The demo reads as text: no 4-token sequence repeats within a continuation."""
    ours = engine_runs.run()
    for prompt, tokens in zip(ours["prompts"], ours["tokens"], strict=True):
        assert not _repeated_4grams(tokens), f"{prompt!r} loops: {_repeated_4grams(tokens)}"


def test_tokens_do_not_depend_on_the_kernel_build(engine_runs) -> None:
    """The AVX2 build of vLLM's CPU kernels gives the host's build's tokens (fp32)."""
    ours = engine_runs.run("--enforce-eager")
    avx2 = engine_runs.run("--enforce-eager", env={CPU_ISA_ENV: "avx2"})
    assert avx2["tokens"] == ours["tokens"]
    assert avx2["held_out"]["perplexity"] == pytest.approx(ours["held_out"]["perplexity"], rel=1e-4)
