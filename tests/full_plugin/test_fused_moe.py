"""The reference fused-MoE ops against transformers' Mixtral block and a per-token W8A8
computation, the CPU INT8 experts against the reference, and the MoE methods' refusals
(``reference_kernels/fused_moe.py``, ``moe/fused_moe_method.py``,
``moe/int8_fused_moe_method.py``)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch

from vllm_platform_template.moe.fused_moe_method import refuse_unsupported, unsupported_features
from vllm_platform_template.reference_kernels.fused_moe import (
    fused_moe,
    fused_moe_w8a8_int8,
    route_topk_softmax,
)
from vllm_platform_template.reference_kernels.int8_linear import w8a8_int8_linear


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


def _int8_experts(tokens: int = 9, experts: int = 4, hidden: int = 64, inter: int = 32):
    gen = torch.Generator().manual_seed(tokens)
    x = torch.randn(tokens, hidden, generator=gen)
    logits = torch.randn(tokens, experts, generator=gen)
    w13 = torch.randint(-127, 128, (experts, 2 * inter, hidden), dtype=torch.int8, generator=gen)
    w2 = torch.randint(-127, 128, (experts, hidden, inter), dtype=torch.int8, generator=gen)
    w13_scale = torch.rand(experts, 2 * inter, generator=gen) / 500
    w2_scale = torch.rand(experts, hidden, generator=gen) / 500
    return x, logits, w13, w13_scale, w2, w2_scale


def test_int8_reference_is_each_tokens_experts_in_w8a8() -> None:
    """Token by token, only its own top-2 experts, each projection a W8A8 linear layer on
    that token alone (per-token scales make a row's quantization independent of the
    batch): the same output, to fp32 rounding."""
    x, logits, w13, w13_scale, w2, w2_scale = _int8_experts()
    got = fused_moe_w8a8_int8(x, logits, w13, w13_scale, w2, w2_scale, 2, True)
    weights, ids = route_topk_softmax(logits, 2, True)
    for t in range(x.shape[0]):
        want = torch.zeros_like(x[t : t + 1])
        for weight, e in zip(weights[t].tolist(), ids[t].tolist(), strict=True):
            gate, up = w8a8_int8_linear(x[t : t + 1], w13[e], w13_scale[e]).chunk(2, dim=-1)
            hidden = torch.nn.functional.silu(gate) * up
            want += weight * w8a8_int8_linear(hidden, w2[e], w2_scale[e])
        torch.testing.assert_close(got[t : t + 1], want)


def test_cpu_int8_experts_equal_the_reference() -> None:
    """The CPU kernel (torch._int_mm per projection) gives the reference's bits."""
    from vllm_platform_template.devices.cpu.kernels import fused_moe_w8a8_int8 as cpu_kernel

    for tokens in (1, 17):
        args = (*_int8_experts(tokens), 2, False)
        assert torch.equal(cpu_kernel(*args), fused_moe_w8a8_int8(*args))


def _quant_args(**overrides) -> SimpleNamespace:
    fields = {"strategy": "channel", "dynamic": False, "symmetric": True}
    return SimpleNamespace(**{**fields, **overrides})


def test_int8_method_takes_llm_compressor_w8a8_experts() -> None:
    from vllm_platform_template.moe.int8_fused_moe_method import TemplateInt8FusedMoEMethod

    method = TemplateInt8FusedMoEMethod(
        _quant_args(), _quant_args(strategy="token", dynamic=True), SimpleNamespace()
    )
    assert method.is_monolithic


@pytest.mark.parametrize(
    ("weights", "activations", "named"),
    [
        ({"strategy": "tensor"}, {}, "tensor weights"),
        ({}, {"dynamic": False}, "static"),
        ({}, {"symmetric": False}, "asymmetric"),
    ],
)
def test_int8_method_refuses_other_schemes_naming_them(weights, activations, named) -> None:
    from vllm_platform_template.moe.int8_fused_moe_method import TemplateInt8FusedMoEMethod

    input_quant = _quant_args(**{"strategy": "token", "dynamic": True, **activations})
    with pytest.raises(ValueError, match=named):
        TemplateInt8FusedMoEMethod(_quant_args(**weights), input_quant, SimpleNamespace())


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


def test_a_layer_is_refused_with_everything_it_lacks() -> None:
    """Its features and the kernel its method needs on its device, in one message."""
    refuse_unsupported(_layer(w13_weight=torch.empty(1)), "fused_moe_w8a8_int8")  # cpu: taken
    layer = _layer(scoring_func="sigmoid", w13_weight=torch.empty(1, device="meta"))
    with pytest.raises(ValueError, match="sigmoid scoring, a fused_moe_w8a8_int8 kernel for meta"):
        refuse_unsupported(layer, "fused_moe_w8a8_int8")
