"""The reference fused-MoE op against transformers' Mixtral block, and the MoE method's
refusals (``reference_kernels/fused_moe.py``, ``moe/fused_moe_method.py``)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch

from vllm_platform_template.moe.fused_moe_method import unsupported_features
from vllm_platform_template.reference_kernels.fused_moe import fused_moe


def test_reference_equals_transformers_mixtral_block() -> None:
    """The same weights through transformers' MixtralSparseMoeBlock (vLLM's w13 is its
    gate_up_proj: gate rows then up rows): equal in fp32 to rounding (each expert's GEMM
    runs over every token here, over its own tokens there)."""
    from transformers import MixtralConfig
    from transformers.models.mixtral.modeling_mixtral import MixtralSparseMoeBlock

    config = MixtralConfig(
        hidden_size=64, intermediate_size=32, num_local_experts=4, num_experts_per_tok=2
    )
    block = MixtralSparseMoeBlock(config).eval()
    gen = torch.Generator().manual_seed(0)
    with torch.no_grad():
        for parameter in block.parameters():
            parameter.copy_(torch.randn(parameter.shape, generator=gen) / 4)
        x = torch.randn(11, 64, generator=gen)
        want = block(x[None])[0]
        logits = torch.nn.functional.linear(x, block.gate.weight)
        got = fused_moe(x, logits, block.experts.gate_up_proj, block.experts.down_proj, 2, True)
    torch.testing.assert_close(got, want)


def _layer(**overrides) -> SimpleNamespace:
    fields = {
        "use_grouped_topk": False,
        "custom_routing_function": None,
        "scoring_func": "softmax",
        "e_score_correction_bias": None,
        "apply_router_weight_on_input": False,
        "expert_map": None,
        "activation": SimpleNamespace(value="silu"),
        "moe_config": SimpleNamespace(has_bias=False),
    }
    return SimpleNamespace(**{**fields, **overrides})


def test_mixtral_style_layers_are_taken() -> None:
    assert unsupported_features(_layer()) == []


@pytest.mark.parametrize(
    ("override", "named"),
    [
        ({"use_grouped_topk": True}, "grouped top-k"),
        ({"scoring_func": "sigmoid"}, "sigmoid scoring"),
        ({"expert_map": torch.arange(2)}, "expert parallelism"),
        ({"activation": SimpleNamespace(value="gelu")}, "gelu activation"),
        ({"moe_config": SimpleNamespace(has_bias=True)}, "expert biases"),
    ],
)
def test_other_layers_are_refused_naming_what_they_need(override, named) -> None:
    problems = unsupported_features(_layer(**override))
    assert any(named in p for p in problems), problems
