"""TEMPLATE_ATTN's vLLM glue: path selection, registration, capabilities, builder and impl.

Engine-free: the builder gets a minimal stand-in for ``VllmConfig`` and a real
``CommonAttentionMetadata``; the impl runs a KV write and an attention step on
the reference path. The helpers here (``selector``, ``make_builder``,
``make_step``, ``run_step``) also serve the tests of a device's own kernel path.
"""

from __future__ import annotations

import pytest
import torch
from attention_steps import (
    make_builder,
    make_step,
    run_step,
    selector,
)
from platform_resolution import needs_stock_cpu_platform
from vllm.v1.attention.backend import AttentionCGSupport, AttentionType
from vllm.v1.attention.backends.registry import AttentionBackendEnum
from vllm.v1.kv_cache_interface import KVCacheLayout

from vllm_platform_template.attention.backend import (
    TemplateAttentionBackend,
    TemplateAttentionImpl,
    TemplateAttentionMetadataBuilder,
)
from vllm_platform_template.attention.kernel_choice import resolve_attention_kernels
from vllm_platform_template.attention.registration import (
    attention_backend_qualname,
    register_attention_backend,
)
from vllm_platform_template.devices.gpu.device import DEVICE as FOLDER
from vllm_platform_template.settings import ATTENTION_BACKEND_QUALNAME, parse_options

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


def test_registration_is_idempotent_and_names_an_enum_member() -> None:
    register_attention_backend()
    register_attention_backend()
    member = AttentionBackendEnum[TemplateAttentionBackend.get_name()]
    assert member.get_class() is TemplateAttentionBackend
    assert member.get_path() == ATTENTION_BACKEND_QUALNAME
    assert attention_backend_qualname(selector()) == ATTENTION_BACKEND_QUALNAME


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


@needs_stock_cpu_platform
def test_builder_and_impl_reference_path() -> None:
    output, path = run_step("reference")
    assert path == "reference"
    assert torch.isfinite(output).all()


def test_builder_rejects_non_causal_batches() -> None:
    cm, _ = make_step()
    cm.causal = False
    with pytest.raises(NotImplementedError, match="causal"):
        make_builder("reference", torch.float32).build(0, cm)
