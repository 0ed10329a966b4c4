"""TEMPLATE_ATTN steps built as vLLM builds them: the metadata builder, a step, its run.

Shared by the backend's tests (``tests/shared/test_attention_backend.py``) and each device's
(``test_cpu_attention_backend.py``).
"""

from __future__ import annotations

from types import SimpleNamespace

import torch
from vllm.v1.attention.backend import CommonAttentionMetadata
from vllm.v1.attention.selector import AttentionSelectorConfig
from vllm.v1.kv_cache_interface import FullAttentionSpec

from vllm_platform_template.attention.backend import (
    TemplateAttentionImpl,
    TemplateAttentionMetadataBuilder,
)


def selector(**overrides) -> AttentionSelectorConfig:
    return AttentionSelectorConfig(
        **{"head_size": 64, "dtype": torch.float32, "kv_cache_dtype": "auto", "block_size": 128}
        | overrides
    )


NUM_HEADS, NUM_KV_HEADS, HEAD_SIZE, BLOCK_SIZE, NUM_BLOCKS = 8, 2, 64, 32, 12


def make_builder(attention: str, dtype: torch.dtype) -> TemplateAttentionMetadataBuilder:
    vllm_config = SimpleNamespace(
        model_config=SimpleNamespace(dtype=dtype, get_num_attention_heads=lambda _: NUM_HEADS),
        parallel_config=None,
        additional_config={"template": {"attention": attention}},
        compilation_config=SimpleNamespace(static_forward_context={}),
        scheduler_config=SimpleNamespace(max_num_seqs=4),
    )
    spec = FullAttentionSpec(
        block_size=BLOCK_SIZE, num_kv_heads=NUM_KV_HEADS, head_size=HEAD_SIZE, dtype=dtype
    )
    return TemplateAttentionMetadataBuilder(spec, ["layer.0"], vllm_config, torch.device("cpu"))


def make_step() -> tuple[CommonAttentionMetadata, dict[str, torch.Tensor]]:
    """Two requests: a 40-token prefill and a decode at position 70; 2 padding tokens."""
    gen = torch.Generator().manual_seed(0)
    q_lens, seq_lens = [40, 1], [40, 71]
    block_table = torch.tensor([[3, 7, 0], [1, 9, 4]], dtype=torch.int32)
    positions = [range(40), range(70, 71)]
    slots = [int(block_table[r, p // BLOCK_SIZE]) * BLOCK_SIZE + p % BLOCK_SIZE
             for r, ps in enumerate(positions) for p in ps] + [-1, -1]  # fmt: skip
    num_tokens = len(slots)
    qsl = torch.tensor([0, 40, 41], dtype=torch.int32)
    cm = CommonAttentionMetadata(
        query_start_loc=qsl,
        query_start_loc_cpu=qsl,
        seq_lens=torch.tensor(seq_lens, dtype=torch.int32),
        num_reqs=2,
        num_actual_tokens=sum(q_lens),
        max_query_len=max(q_lens),
        max_seq_len=max(seq_lens),
        block_table_tensor=block_table,
        slot_mapping=torch.tensor(slots, dtype=torch.int64),
    )
    # The decode request's 70 earlier tokens, as an earlier step would have cached them.
    history = {
        "key": torch.randn(70, NUM_KV_HEADS, HEAD_SIZE, generator=gen),
        "value": torch.randn(70, NUM_KV_HEADS, HEAD_SIZE, generator=gen),
        "slots": torch.tensor(
            [int(block_table[1, p // BLOCK_SIZE]) * BLOCK_SIZE + p % BLOCK_SIZE for p in range(70)]
        ),
    }
    tensors = {
        "query": torch.randn(num_tokens, NUM_HEADS, HEAD_SIZE, generator=gen),
        "key": torch.randn(num_tokens, NUM_KV_HEADS, HEAD_SIZE, generator=gen),
        "value": torch.randn(num_tokens, NUM_KV_HEADS, HEAD_SIZE, generator=gen),
    } | {f"history_{k}": v for k, v in history.items()}
    return cm, tensors


def run_step(attention: str) -> tuple[torch.Tensor, str]:
    from vllm.config import VllmConfig, set_current_vllm_config

    cm, t = make_step()
    builder = make_builder(attention, torch.float32)
    metadata = builder.build(0, cm)
    with set_current_vllm_config(
        VllmConfig(additional_config={"template": {"attention": attention}})
    ):
        impl = TemplateAttentionImpl(NUM_HEADS, HEAD_SIZE, HEAD_SIZE**-0.5, NUM_KV_HEADS)
    kv_cache = torch.zeros(NUM_BLOCKS, NUM_KV_HEADS, BLOCK_SIZE, 2 * HEAD_SIZE)
    layer = torch.nn.Module()
    impl.do_kv_cache_update(
        layer, t["history_key"], t["history_value"], kv_cache, t["history_slots"]
    )
    impl.do_kv_cache_update(layer, t["key"], t["value"], kv_cache, cm.slot_mapping)
    output = torch.full_like(t["query"], 5.0)
    assert impl.forward(layer, t["query"], t["key"], t["value"], kv_cache, None, output) is output
    assert (output == 5.0).all()  # profile/warm-up run: nothing computed
    impl.forward(layer, t["query"], t["key"], t["value"], kv_cache, metadata, output)
    assert (output[cm.num_actual_tokens :] == 5.0).all()  # padding rows untouched
    return output[: cm.num_actual_tokens], metadata.kernels.name
