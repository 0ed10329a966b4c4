"""Registering ``TEMPLATE_ATTN`` with vLLM and choosing it for a layer.

vLLM hooks served:

- ``vllm.v1.attention.backends.registry.register_backend``: adds the
  ``TEMPLATE_ATTN`` member to ``AttentionBackendEnum`` (``Attention.__init__``
  maps ``get_name()`` back to a member). The registry is per process, so
  :func:`register_attention_backend` runs from the general plugin in every
  process (front end, engine core, workers).
- ``Platform.get_attn_backend_cls(selected_backend, attn_selector_config,
  num_heads)``: :func:`attention_backend_qualname` is its body for the template
  platforms. vLLM's ``CpuPlatform`` never validates the backend against the
  layer, so this does: a layer the backend cannot serve fails at model build
  time with the reasons, instead of computing wrong attention.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from vllm_platform_template.log import get_logger
from vllm_platform_template.settings import ATTENTION_BACKEND_NAME, ATTENTION_BACKEND_QUALNAME

if TYPE_CHECKING:
    from vllm.platforms.interface import DeviceCapability
    from vllm.v1.attention.selector import AttentionSelectorConfig

logger = get_logger(__name__)


def register_attention_backend() -> None:
    """Add ``TEMPLATE_ATTN`` to vLLM's ``AttentionBackendEnum`` (idempotent).

    An existing member is left alone, including a user's override of its class
    (``register_backend(AttentionBackendEnum.TEMPLATE_ATTN, "their.Backend")``).
    """
    from vllm.v1.attention.backends.registry import AttentionBackendEnum, register_backend

    if ATTENTION_BACKEND_NAME in AttentionBackendEnum.__members__:
        return
    register_backend(ATTENTION_BACKEND_NAME, ATTENTION_BACKEND_QUALNAME)
    logger.debug(
        "registered attention backend %s -> %s", ATTENTION_BACKEND_NAME, ATTENTION_BACKEND_QUALNAME
    )


def attention_backend_qualname(
    attn_selector_config: AttentionSelectorConfig,
    device_capability: DeviceCapability | None = None,
) -> str:
    """Qualname of the ``TEMPLATE_ATTN`` class for a layer, after checking it can serve it.

    Raises ``NotImplementedError`` for MLA and sparse attention (the template has
    no backend for them) and ``ValueError`` listing ``validate_configuration``'s
    reasons for anything else it does not support.
    """
    from vllm.v1.attention.backends.registry import AttentionBackendEnum

    if attn_selector_config.use_mla:
        raise NotImplementedError(
            f"{ATTENTION_BACKEND_NAME}: MLA attention (DeepSeek-style latent KV) is not supported "
            "by the template platform; add an MLA backend and select it in get_attn_backend_cls"
        )
    if attn_selector_config.use_sparse:
        raise NotImplementedError(
            f"{ATTENTION_BACKEND_NAME}: sparse attention is not supported by the template platform"
        )
    register_attention_backend()
    backend = AttentionBackendEnum[ATTENTION_BACKEND_NAME]
    backend_cls = backend.get_class()
    reasons = backend_cls.validate_configuration(
        device_capability=device_capability,  # type: ignore[arg-type]
        **attn_selector_config._asdict(),
    )
    if reasons:
        raise ValueError(
            f"{ATTENTION_BACKEND_NAME} cannot serve this attention layer: {'; '.join(reasons)} "
            f"({attn_selector_config!r})"
        )
    return backend.get_path()
