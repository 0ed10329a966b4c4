"""The plugin's own settings, read from vLLM's ``additional_config``.

vLLM hook: ``VllmConfig.additional_config`` (``--additional-config``) is the
documented place for platform-specific options; it is also part of vLLM's
config hash, so every option here invalidates compile caches when it changes.

    --additional-config '{"template": {"compile_stage": "fusion_only"}}'
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import Any

CONFIG_KEY = "template"
COMPILE_STAGES = ("graph", "fusion_only")
MODEL_IMPLS = ("vllm", "fused")
ATTENTION_PATHS = ("auto", "reference")


@dataclass(frozen=True)
class TemplateOptions:
    """Options under ``additional_config["template"]``."""

    compile_stage: str = "graph"
    """``graph``: fusion passes, then the device graph compiler (Inductor on the
    reference backends). ``fusion_only``: fusion passes and IR lowering only,
    the pieces run as FX graphs with no code generation."""
    model_impl: str = "vllm"
    """``vllm``: vLLM's own model classes. ``fused``: the plugin's device-specific
    model code with hand-fused ops (the manual-fusion road)."""
    graph_debug: bool = False
    """Check input addresses at every graph replay (slow; for porting work)."""
    attention: str = "auto"
    """Kernels of the TEMPLATE_ATTN backend. ``auto``: the device's kernels (vLLM's
    CPU attention kernels on the CPU when loaded, Triton on CUDA). ``reference``:
    the plain-torch reference (slow; the spec the kernels are tested against)."""


def parse_options(additional_config: Any) -> TemplateOptions:
    """Validate ``additional_config["template"]``; raise ValueError saying what to fix."""
    if not isinstance(additional_config, Mapping):
        return TemplateOptions()
    raw = additional_config.get(CONFIG_KEY, {})
    if not isinstance(raw, Mapping):
        raise ValueError(
            f"additional_config[{CONFIG_KEY!r}] must be a JSON object, got {raw!r}; e.g. "
            '--additional-config \'{"template": {"compile_stage": "fusion_only"}}\''
        )
    known = {f.name for f in fields(TemplateOptions)}
    unknown = sorted(set(raw) - known)
    if unknown:
        raise ValueError(
            f"unknown template option(s) {unknown} in additional_config; known: {sorted(known)}"
        )
    options = TemplateOptions(**raw)
    if options.compile_stage not in COMPILE_STAGES:
        raise ValueError(
            f"template compile_stage must be one of {COMPILE_STAGES}, got {options.compile_stage!r}"
        )
    if options.model_impl not in MODEL_IMPLS:
        raise ValueError(
            f"template model_impl must be one of {MODEL_IMPLS}, got {options.model_impl!r}"
        )
    if options.attention not in ATTENTION_PATHS:
        raise ValueError(
            f"template attention must be one of {ATTENTION_PATHS}, got {options.attention!r}"
        )
    if not isinstance(options.graph_debug, bool):
        raise ValueError(f"template graph_debug must be true or false, got {options.graph_debug!r}")
    return options
