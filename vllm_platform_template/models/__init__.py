"""Device-specific model code: the manual-fusion road of vLLM's model-development RFC.

vLLM's RFC "Changes in vLLM Model Development" moves new models toward
hand-fused ops written into per-hardware model code (``models/<model>/<vendor>/``
with its own ``kernels/`` and ``tests/``), instead of relying on full-graph
compilation and compiler fusion passes. This package is that road for the
template device; the compiler road is ``vllm_platform_template.compiler``.

vLLM hook: ``ModelConfig.model_class_overrides`` - the platform points an
architecture at a class here when the user opts in with
``--additional-config '{"template": {"model_impl": "fused"}}'``, and vLLM
registers it in its ``ModelRegistry`` in every process.
"""

FUSED_MODELS: dict[str, str] = {
    "LlamaForCausalLM": "vllm_platform_template.models.llama.model:TemplateFusedLlamaForCausalLM",
}
