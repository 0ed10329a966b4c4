"""TEMPLATE_ATTN's vLLM glue: path selection, registration, capabilities, builder and impl.

Engine-free: the builder gets a minimal stand-in for ``VllmConfig`` and a real
``CommonAttentionMetadata``; the impl runs a KV write and an attention step on
the reference path. The helpers here (``selector``, ``make_builder``,
``make_step``, ``run_step``) also serve the tests of a device's own kernel path.
"""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch
from vllm.v1.attention.backend import AttentionCGSupport, AttentionType, CommonAttentionMetadata
from vllm.v1.attention.backends.registry import AttentionBackendEnum
from vllm.v1.attention.selector import AttentionSelectorConfig
from vllm.v1.kv_cache_interface import FullAttentionSpec, KVCacheLayout

from vllm_platform_template.attention.backend import (
    TemplateAttentionBackend,
    TemplateAttentionImpl,
    TemplateAttentionMetadataBuilder,
)
from vllm_platform_template.attention.paths import resolve_attention_kernels
from vllm_platform_template.attention.registration import (
    BACKEND_QUALNAME,
    attention_backend_qualname,
    register_attention_backend,
)
from vllm_platform_template.devices.gpu.device import DEVICE as FOLDER
from vllm_platform_template.settings import parse_options

# The device folder's attention kernels where its kernel table runs here, else the reference.
FOLDER_PATH = FOLDER.attention().name if FOLDER.kernels_status()[0] else "reference"  # type: ignore[union-attr]

# --------------------------------------------------------------------------
# Path selection and the option behind it
# --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("device", "requested", "expected"),
    [
        (FOLDER.torch_device_type, "auto", FOLDER_PATH),
        (FOLDER.torch_device_type, "reference", "reference"),
        ("meta", "auto", "reference"),  # no template device at all
    ],
)
def test_attention_kernels_per_device(device: str, requested: str, expected: str) -> None:
    kernels = resolve_attention_kernels(device, requested, torch.float32, 16, 64)
    assert kernels.name == expected


def test_attention_kernels_reject_unknown_request() -> None:
    with pytest.raises(ValueError, match="must be one of"):
        resolve_attention_kernels("cpu", "triton", torch.float32, 16, 64)


def test_attention_option() -> None:
    assert parse_options({}).attention == "auto"
    assert parse_options({"template": {"attention": "reference"}}).attention == "reference"
    with pytest.raises(ValueError, match="template attention must be one of"):
        parse_options({"template": {"attention": "flash"}})


# --------------------------------------------------------------------------
# Registration and the backend class contract
# --------------------------------------------------------------------------


def selector(**overrides) -> AttentionSelectorConfig:
    return AttentionSelectorConfig(
        **{"head_size": 64, "dtype": torch.float32, "kv_cache_dtype": "auto", "block_size": 128}
        | overrides
    )


def test_registration_is_idempotent_and_names_an_enum_member() -> None:
    register_attention_backend()
    register_attention_backend()
    member = AttentionBackendEnum[TemplateAttentionBackend.get_name()]
    assert member.get_class() is TemplateAttentionBackend
    assert member.get_path() == BACKEND_QUALNAME
    assert attention_backend_qualname(selector()) == BACKEND_QUALNAME


def test_backend_capabilities() -> None:
    b = TemplateAttentionBackend
    assert b.forward_includes_kv_cache_update is False
    assert b.supported_kv_cache_layouts() == (KVCacheLayout.LBHNC,)
    assert b.supported_kv_cache_dtypes == ["auto"]
    assert set(b.supported_dtypes) == {torch.float16, torch.bfloat16, torch.float32}
    assert b.supports_block_size(16) and b.supports_block_size(128)
    assert not b.supports_block_size(8)
    assert b.get_impl_cls() is TemplateAttentionImpl
    assert b.get_builder_cls() is TemplateAttentionMetadataBuilder
    assert TemplateAttentionMetadataBuilder._cudagraph_support == AttentionCGSupport.NEVER
    for feature in ("supports_sink", "supports_sliding_window", "supports_non_causal", "is_mla"):
        assert getattr(b, feature)() is False, feature


@pytest.mark.parametrize(
    ("overrides", "reason"),
    [
        ({"has_sliding_window": True}, "sliding window not supported"),
        ({"use_mla": True}, "MLA not supported"),
        ({"kv_cache_dtype": "fp8"}, "kv_cache_dtype not supported"),
        ({"has_sink": True}, "attention sinks not supported"),
        ({"use_non_causal": True}, "non-causal attention not supported"),
        ({"attn_type": AttentionType.ENCODER_ONLY}, "attention type"),
        ({"block_size": 8}, "block_size not supported"),
    ],
)
def test_validate_configuration_gives_reasons(overrides: dict, reason: str) -> None:
    reasons = TemplateAttentionBackend.validate_configuration(
        device_capability=None,  # type: ignore[arg-type]
        **selector(**overrides)._asdict(),
    )
    assert any(reason in r for r in reasons), reasons


def test_qualname_refuses_what_it_cannot_serve() -> None:
    with pytest.raises(NotImplementedError, match="MLA"):
        attention_backend_qualname(selector(use_mla=True))
    with pytest.raises(NotImplementedError, match="sparse"):
        attention_backend_qualname(selector(use_sparse=True))
    with pytest.raises(ValueError, match="sliding window not supported"):
        attention_backend_qualname(selector(has_sliding_window=True))
    with pytest.raises(ValueError, match="kv_cache_dtype not supported"):
        attention_backend_qualname(selector(kv_cache_dtype="fp8_e4m3"))


@pytest.mark.parametrize(
    ("kwargs", "feature"),
    [
        ({"sliding_window": 128}, "sliding window"),
        ({"alibi_slopes": [0.5] * 8}, "ALiBi"),
        ({"logits_soft_cap": 30.0}, "soft cap"),
        ({"kv_cache_dtype": "fp8"}, "kv_cache_dtype"),
        ({"attn_type": AttentionType.ENCODER_DECODER}, "attention type"),
        ({"sinks": torch.zeros(8)}, "attention sinks"),
    ],
)
def test_impl_names_unsupported_features(kwargs: dict, feature: str) -> None:
    with pytest.raises(NotImplementedError, match=feature):
        TemplateAttentionImpl(8, 64, 0.125, 2, **kwargs)


# --------------------------------------------------------------------------
# Builder + impl, one mixed prefill/decode step
# --------------------------------------------------------------------------

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
    return output[: cm.num_actual_tokens], metadata.path


def test_builder_and_impl_reference_path() -> None:
    output, path = run_step("reference")
    assert path == "reference"
    assert torch.isfinite(output).all()


def test_builder_rejects_non_causal_batches() -> None:
    cm, _ = make_step()
    cm.causal = False
    with pytest.raises(NotImplementedError, match="causal"):
        make_builder("reference", torch.float32).build(0, cm)
