"""Device-specific model code: the manual-fusion road of vLLM's model-development RFC.

vLLM's RFC "Changes in vLLM Model Development" moves new models toward
hand-fused ops written into per-hardware model code (``models/<model>/<vendor>/``
with its own ``kernels/`` and ``tests/``), instead of relying on full-graph
compilation and compiler fusion passes. This package is that road for the
template device (its kernels here, their tests with the plugin's other tests in
``tests/full_plugin/test_fused_ops.py``: the package carries no test code); the
compiler road is ``vllm_platform_template.compiler``.

vLLM hook: ``ModelConfig.model_class_overrides`` - the platform's
``apply_config_platform_defaults`` calls :func:`use_model_code`, which points an
architecture at a class here when the user opts in with
``--additional-config '{"template": {"model_impl": "fused"}}'``, and vLLM
registers it in its ``ModelRegistry`` in every process.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from vllm_platform_template.log import get_logger

if TYPE_CHECKING:
    from vllm.config import VllmConfig

logger = get_logger(__name__)

FUSED_MODELS: dict[str, str] = {
    "LlamaForCausalLM": "vllm_platform_template.models.llama.model:TemplateFusedLlamaForCausalLM",
}


def use_model_code(vllm_config: VllmConfig) -> None:
    """The manual-fusion road (``model_impl`` "fused"), as the platform's
    ``apply_config_platform_defaults`` asks: the plugin's model class for the
    architectures it covers, no full-graph compilation."""
    from vllm.config import CompilationMode

    cc = vllm_config.compilation_config
    if cc.mode not in (None, CompilationMode.NONE):
        raise ValueError(
            'model_impl "fused" runs without full-graph compilation; remove the '
            f'compilation mode {cc.mode!r} or use model_impl "vllm"'
        )
    cc.mode = CompilationMode.NONE
    model_config = vllm_config.model_config
    if model_config is None:
        return
    architectures = [a for a in model_config.architectures if a in FUSED_MODELS]
    if not architectures:
        raise ValueError(
            f'model_impl "fused" has device-specific code for {sorted(FUSED_MODELS)}, '
            f'not for {model_config.architectures}; use model_impl "vllm"'
        )
    for arch in architectures:
        model_config.model_class_overrides.setdefault(arch, FUSED_MODELS[arch])
    logger.info(
        "template platform: model_impl=fused: %s uses %s, compilation off",
        architectures,
        [FUSED_MODELS[a] for a in architectures],
    )
