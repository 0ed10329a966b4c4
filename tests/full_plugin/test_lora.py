"""LoRA on the template CPU platform beside stock vLLM CPU (``lora_runner.py``).

Two rank-8 adapters of the embedded tiny model (fp32, greedy, ``max_loras=2``): each
alone over two prompts, then the base model and both adapters in one batch, then the
adapters swapped. The template's LoRA layers run on its punica wrapper
(``lora/punica.py``, the CPU folder's ``punica_wrapper``).

- Every request that uses an adapter: tokens equal stock's, and equal to the same
  request run alone (the batch does not change an adapter's answer).
- The adapters take effect: each changes the base model's tokens.
- Requests without an adapter batched beside LoRA requests: the base model's tokens on
  the template. vLLM 0.32's CPU punica ops give them the last adapter slot's delta
  (index -1; vllm-project/vllm PRs #48421, #49656): stock's answer for them is reported
  beside ours, not required.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.e2e

RUNNER = Path(__file__).with_name("lora_runner.py")


@pytest.fixture(scope="module")
def lora_runs(engine_runs, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    runs = {}
    for device in ("cpu", "stock"):
        out = tmp_path_factory.mktemp(f"lora-{device}")
        report = engine_runs.run_script(RUNNER, device, str(out))
        assert "mixed" in report, report.get("_stderr", "")[-4000:]
        runs[device] = report
    return runs


@pytest.mark.feature("LoRA", device="cpu")
def test_the_template_runs_lora_on_its_punica_wrapper(lora_runs) -> None:
    ours = lora_runs["cpu"]
    assert ours["platform"] == "TemplateCpuPlatform"
    assert ours["punica_wrapper"] == "TemplatePunicaWrapper"
    assert {"MergedQKVParallelLinearWithLoRA", "LogitsProcessorWithLoRA"} <= set(
        ours["lora_layers"]
    )
    assert lora_runs["stock"]["punica_wrapper"] == "PunicaWrapperCPU"


@pytest.mark.feature("LoRA", device="cpu")
def test_adapters_change_the_answer_and_equal_stocks(lora_runs) -> None:
    ours, stock = lora_runs["cpu"], lora_runs["stock"]
    base, first, second = ours["alone"]
    assert first != base and second != base and first != second
    assert ours["alone"] == stock["alone"]
    # the adapter rows of the mixed batch (rows 2-5) and the swapped adapters
    assert ours["mixed"][2:] == stock["mixed"][2:]
    assert ours["swapped"] == stock["swapped"]


@pytest.mark.feature("LoRA", device="cpu")
def test_a_batch_does_not_change_any_request_s_answer(lora_runs, record_property) -> None:
    ours, stock = lora_runs["cpu"], lora_runs["stock"]
    base, first, second = ours["alone"]
    assert ours["mixed"] == [*base, *first, *second]
    assert ours["swapped"] == [second[0], first[1]]
    if stock["mixed"][:2] != base:  # the claim about stock, only where this run saw it
        record_property("matrix", "passed (stock: base requests batched with LoRA ones wrong)")
        print(
            "stock vLLM CPU gives the requests without an adapter another answer in a mixed "
            f"batch: {stock['mixed'][:2]} (alone: {base}); its punica ops read slot -1 as the "
            "last adapter (vllm-project/vllm#48421)"
        )
