"""``TemplateCompiler``: the platform's ``CompilerInterface`` (fusion-only, then graph).

vLLM hook: ``Platform.get_compile_backend()`` names this class; under
``CompilationMode.VLLM_COMPILE`` vLLM's ``VllmBackend`` splits the model at the
attention ops and calls :meth:`TemplateCompiler.compile` once per piece and
compile range, with the platform's pass manager in ``compiler_config``.

Both stages go through ``torch._inductor.standalone_compile`` so that
AOTAutograd produces the functional aten graph the passes need, and so that
the result is an ``AOTCompiledArtifact``: vLLM's default "mega" AOT cache can
only store and reload pieces of that type (a plain callable saves nothing and
the warm start crashes with ``'NoneType' object is not callable``).

- ``fusion_only``: AOTAutograd without decompositions; our ``inner_compile``
  runs the pass manager (fusion passes + IR lowering) and returns the graph as
  an eager runnable - no code generation.
- ``graph``: vLLM's Inductor adaptor with the same pass manager installed as
  Inductor's post-grad pass, so Inductor generates code for the rewritten graph.
  A vendor replaces this with its own graph compiler.

A failure in a stage leaves that piece running eagerly (one warning naming the
piece and the cause); the output stays correct.
"""

from __future__ import annotations

import copy
import hashlib
import inspect
import os
import time
from collections.abc import Callable
from typing import Any, Literal

import torch
import vllm.envs as envs
from torch import fx
from vllm.compilation.compiler_interface import (
    CompilerInterface,
    InductorStandaloneAdaptor,
    get_inductor_factors,
)
from vllm.config import VllmConfig
from vllm.config.utils import Range

from vllm_platform_template import patches
from vllm_platform_template.compiler.cache_key import compile_cache_key
from vllm_platform_template.compiler.stats import STATS
from vllm_platform_template.log import get_logger
from vllm_platform_template.settings import INDUCTOR_POST_PASS_KEY, options_of

logger = get_logger(__name__)

ARTIFACT_SUFFIX = ".template-aot"


def _any_op(name: str) -> bool:
    """Every op may be pickled with the piece (the plugin's and vLLM's custom ops too)."""
    return True


def _eager_output_code(gm: fx.GraphModule, inputs: list[Any]) -> Any:
    """The piece as an eager FX graph, in the form AOTAutograd's bundled cache stores.

    With ``aot=True`` AOTAutograd bundles the inner compiler's result into the
    artifact and asserts that it is an ``OutputCode`` (torch 2.11 raised
    "expected OutputCode, got <class 'function'>" for a plain boxed callable on
    every piece; torch 2.13 accepts both). ``RegionalOutputCode`` is torch's
    ``OutputCode`` for an FX graph run eagerly, pickled with ``GraphPickler``.
    """
    try:
        from torch._inductor.output_code import RegionalOutputCode
    except ImportError:  # a torch without it: the boxed callable
        from torch._dynamo.backends.debugging import boxed_nop

        return boxed_nop(gm, inputs)
    return RegionalOutputCode(gm, ops_filter=_any_op)


def _dynamic_shapes(compile_range: Range) -> Literal["from_example_inputs", "from_graph"]:
    return "from_example_inputs" if compile_range.is_single_size() else "from_graph"


def _standalone_adaptor() -> InductorStandaloneAdaptor:
    """vLLM's Inductor adaptor, saving binary artifacts.

    vLLM 0.33 added a required keyword ``use_aot_compile`` (vLLM passes True for
    every model but its Transformers backend); 0.32 has none. Detected from the
    signature, not the version string (docs/upstream-drift.md, "vLLM 0.33.0").
    """
    if "use_aot_compile" in inspect.signature(InductorStandaloneAdaptor).parameters:
        return InductorStandaloneAdaptor("binary", use_aot_compile=True)  # type: ignore[call-arg]
    return InductorStandaloneAdaptor("binary")


def _piece_name(key: str | None, compile_range: Range) -> str:
    return key or f"piece(range={compile_range})"


class TemplateCompiler(CompilerInterface):
    """Runs the template passes on each piece, then (graph stage) Inductor."""

    name = "template"

    def __init__(self) -> None:
        self.cache_dir: str | None = None
        self.disable_cache = False
        self._inductor = _standalone_adaptor()
        self._warned: set[str] = set()

    # --- cache ------------------------------------------------------------
    def initialize_cache(
        self, cache_dir: str, disable_cache: bool = False, prefix: str = ""
    ) -> None:
        self.cache_dir = cache_dir
        self.disable_cache = disable_cache
        self._inductor.initialize_cache(cache_dir, disable_cache, prefix)

    def compute_hash(self, vllm_config: VllmConfig) -> str:
        stage = options_of(vllm_config).compile_stage
        factors: list[Any] = [compile_cache_key(stage)]
        if stage == "graph":
            factors.append(get_inductor_factors())
        return hashlib.sha256(str(factors).encode()).hexdigest()[:10]

    # --- compile ----------------------------------------------------------
    def compile(
        self,
        graph: fx.GraphModule,
        example_inputs: list[Any],
        compiler_config: dict[str, Any],
        compile_range: Range,
        key: str | None = None,
    ) -> tuple[Callable[..., Any] | None, Any | None]:
        pass_manager = compiler_config[INDUCTOR_POST_PASS_KEY]
        stage = pass_manager.stage
        STATS.stage = stage
        piece = _piece_name(key, compile_range)
        STATS.attention_nodes_in_pieces += sum(
            1
            for node in graph.graph.nodes
            if node.op == "call_function" and "unified_" in str(node.target)
        )
        # Inductor donates (consumes) the graph; keep a copy for the eager fallback.
        original = copy.deepcopy(graph)
        start = time.perf_counter()
        try:
            if stage == "graph":
                result = self._compile_graph(
                    graph, example_inputs, compiler_config, compile_range, key
                )
            else:
                result = self._compile_fusion_only(
                    graph, example_inputs, compiler_config, compile_range, key
                )
        except Exception as e:  # a failing stage must not take the engine down
            result = self._fallback(
                original, example_inputs, compiler_config, compile_range, key, e, stage
            )
        else:
            STATS.compiled_pieces.append(piece)
        STATS.add_time(stage, time.perf_counter() - start)
        for name, count in pass_manager.match_counts.items():
            STATS.fusion_matches[name] = count
        for op, nodes in pass_manager.last_lowering.items():
            per_provider = STATS.lowering.setdefault(op, {})
            for provider in nodes.values():
                per_provider[provider] = per_provider.get(provider, 0) + 1
        return result

    def _compile_graph(self, graph, example_inputs, compiler_config, compile_range, key):
        # Inductor runs the pass manager (the config's post-grad pass) after its own passes.
        return self._inductor.compile(graph, example_inputs, compiler_config, compile_range, key)

    def _compile_fusion_only(self, graph, example_inputs, compiler_config, compile_range, key):
        pass_manager = compiler_config[INDUCTOR_POST_PASS_KEY]

        def run_passes(gm: fx.GraphModule, inner_inputs: list[Any], **_: Any) -> Any:
            pass_manager(gm.graph)
            gm.recompile()
            return _eager_output_code(gm, inner_inputs)

        return self._aot_eager(
            graph, example_inputs, compiler_config, compile_range, key, run_passes
        )

    def _aot_eager(self, graph, example_inputs, compiler_config, compile_range, key, inner):
        """AOTAutograd (no decompositions) with ``inner`` as the backend; an eager artifact."""
        from torch._inductor import standalone_compile

        # The pass manager stays in the config, where AOTAutograd's cache key sees its
        # uuid; ``inner`` replaces Inductor's inner compile, whose post-grad hook never runs.
        with patches.input_fake_mode_for_standalone_compile(example_inputs):
            artifact = standalone_compile(
                graph,
                example_inputs,
                dynamic_shapes=_dynamic_shapes(compile_range),
                options={
                    "config_patches": compiler_config,
                    "inner_compile": inner,
                    "decompositions": {},
                },
                aot=True,
            )
        return artifact, self._save(artifact, key)

    def _save(self, artifact: Any, key: str | None) -> tuple[str, str] | None:
        """Per-piece file for vLLM's non-mega cache; the mega artifact stores pieces itself."""
        if envs.VLLM_USE_MEGA_AOT_ARTIFACT or self.disable_cache or not key or not self.cache_dir:
            return None
        path = os.path.join(self.cache_dir, key + ARTIFACT_SUFFIX)
        with torch._functorch.config.patch("bundled_autograd_cache", True):
            data = artifact.serialize()
        tmp = path + ".tmp"
        with open(tmp, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
        return key, path

    def _fallback(self, graph, example_inputs, compiler_config, compile_range, key, error, stage):
        piece = _piece_name(key, compile_range)
        STATS.fallbacks.append(piece)
        STATS.fallback_causes[piece] = f"{type(error).__name__}: {error}"[:500]
        if piece not in self._warned:
            self._warned.add(piece)
            logger.warning(
                "template compiler: %s stage failed for %s: %s: %s. This piece runs eagerly "
                "(correct, slower).",
                stage,
                piece,
                type(error).__name__,
                error,
            )

        def no_passes(gm: fx.GraphModule, inner_inputs: list[Any], **_: Any) -> Any:
            return _eager_output_code(gm, inner_inputs)

        try:
            # Still an AOT artifact, so the mega cache can store it.
            return self._aot_eager(
                copy.deepcopy(graph), example_inputs, compiler_config, compile_range, key, no_passes
            )
        except Exception:
            logger.debug("AOT eager fallback failed; running the Dynamo graph", exc_info=True)
            return graph, None

    # --- load (vLLM's non-mega cache) -----------------------------------------
    def load(
        self,
        handle: Any,
        graph: fx.GraphModule,
        example_inputs: list[Any],
        graph_index: int,
        compile_range: Range,
    ) -> Callable[..., Any]:
        _, path = handle
        if path.endswith(ARTIFACT_SUFFIX):
            from torch._inductor.standalone_compile import AOTCompiledArtifact

            with open(path, "rb") as f:
                return AOTCompiledArtifact.deserialize(f.read())
        return self._inductor.load(handle, graph, example_inputs, graph_index, compile_range)
