"""Token parity of the template platform with stock vLLM and with transformers.

Greedy decoding of the tiny fp32 model must give the same token ids on the
template platform (eager and compiled) as on stock vLLM's CPU platform (plugin
inactive, separate process) and as transformers' own greedy decoding.
"""

from __future__ import annotations

import pytest

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
    assert all(len(t) == 24 for t in ours["tokens"])


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
    expected = hf_greedy(ours["prompt_token_ids"], max_tokens=24)
    assert ours["tokens"] == expected


def test_no_shutdown_traceback(engine_runs) -> None:
    ours = engine_runs.run("--enforce-eager")
    assert "Traceback" not in ours["_stderr"]
