"""The template's pass manager: fusion passes, then vLLM IR lowering.

vLLM hooks: ``Platform.get_pass_manager_cls`` names this class; vLLM builds it
in ``VllmBackend``, calls ``configure(vllm_config)``, merges any user pass
registered under the platform's ``pass_key`` (vLLM's default,
``post_grad_custom_post_pass``) with ``add``, and hands it to the compiler in
``compiler_config[pass_key]``. The template compiler runs it on
the post-AOTAutograd graph of every piece, in both stages.

Order of a run (mirrors vLLM's ``PostGradPassManager`` so vLLM's own utility
passes keep their contracts):

1. ``NoOpEliminationPass`` (vLLM; if ``pass_config.eliminate_noops``)
2. the template fusion passes of the stage (:data:`FUSION_PASSES`, each with
   the ``stages`` it runs in)
3. passes added with ``add`` (user passes, fault injection in tests)
4. ``PostCleanupPass``, ``VllmIRLoweringPass`` (IR ops -> providers by
   priority, decided per piece and compile range), ``UnsafeCloneEliminationPass``,
   ``PostCleanupPass`` (vLLM's), then ``DefunctionalizePass`` (ours: vLLM's
   ``FixFunctionalizationPass`` only knows vLLM's compiled ``_C`` ops and fails on CPU builds).

vLLM runs its IR lowering only inside Inductor's post-grad hook; running it
here is what lets the fusion-only stage lower IR ops without Inductor.
"""

from __future__ import annotations

from collections import Counter

from torch import fx
from torch._inductor.custom_graph_pass import CustomGraphPass
from vllm.compilation.passes.inductor_pass import InductorPass, get_pass_context
from vllm.compilation.passes.ir.clone_elimination import UnsafeCloneEliminationPass
from vllm.compilation.passes.ir.lowering_pass import VllmIRLoweringPass
from vllm.compilation.passes.utility.noop_elimination import NoOpEliminationPass
from vllm.compilation.passes.utility.post_cleanup import PostCleanupPass
from vllm.config import VllmConfig, set_current_vllm_config

from vllm_platform_template.compiler.cache_key import compile_cache_key
from vllm_platform_template.compiler.passes.add_rms_norm import AddRMSNormFusionPass
from vllm_platform_template.compiler.passes.defunctionalize import DefunctionalizePass
from vllm_platform_template.compiler.passes.silu_and_mul import SiluAndMulFusionPass
from vllm_platform_template.settings import options_of

# The template's fusion passes, in the order they run; each declares its stages.
FUSION_PASSES: tuple[type[AddRMSNormFusionPass] | type[SiluAndMulFusionPass], ...] = (
    AddRMSNormFusionPass,
    SiluAndMulFusionPass,
)


def fusion_passes(stage: str) -> tuple[str, ...]:
    """Names of the template fusion passes that run in ``stage``, in order."""
    return tuple(p.name for p in FUSION_PASSES if stage in p.stages)


class TemplatePassManager(CustomGraphPass):
    """Runs the template's passes on one piece; an Inductor ``CustomGraphPass``."""

    def __init__(self) -> None:
        self.passes: list[InductorPass] = []
        self.user_passes: list[InductorPass] = []
        self.stage = "graph"
        self.last_lowering: dict[str, dict[str, str]] = {}
        self.match_counts: Counter[str] = Counter()

    def configure(self, config: VllmConfig) -> None:
        self.stage = options_of(config).compile_stage
        self.pass_config = config.compilation_config.pass_config
        with set_current_vllm_config(config, check_compile=False):
            self.noop_elimination = (
                NoOpEliminationPass(config) if self.pass_config.eliminate_noops else None
            )
            self.passes = [p(config) for p in FUSION_PASSES if self.stage in p.stages]
            self.post_cleanup = PostCleanupPass(config)
            self.ir_lowering = VllmIRLoweringPass(config)
            self.clone_elimination = UnsafeCloneEliminationPass(config)
            self.defunctionalize = DefunctionalizePass(config)

    def add(self, pass_: InductorPass) -> None:
        assert isinstance(pass_, InductorPass), pass_
        self.user_passes.append(pass_)

    def __call__(self, graph: fx.Graph) -> None:
        compile_range = get_pass_context().compile_range
        if self.noop_elimination is not None:
            self.noop_elimination(graph)
        for pass_ in [*self.passes, *self.user_passes]:
            if pass_.is_applicable_for_range(compile_range):
                pass_(graph)
                self.match_counts[type(pass_).__name__] += getattr(pass_, "matched_count", 0)
        self.post_cleanup(graph)
        self.ir_lowering(graph)
        self.last_lowering = {
            op: dict(nodes) for op, nodes in self.ir_lowering.selected_impls.items()
        }
        self.clone_elimination(graph)
        self.post_cleanup(graph)
        self.defunctionalize(graph)

    def uuid(self) -> str:
        """Inductor/AOTAutograd cache key part: stage, passes and their sources,
        IR priorities and provider sources, pass config and compile range."""
        state = {
            "fingerprint": compile_cache_key(self.stage),
            "pass_config": self.pass_config.compute_hash(),
            "user_passes": [p.uuid() for p in self.user_passes],
            "ir_lowering": self.ir_lowering.uuid(),
            "vllm_passes": [
                p.uuid()
                for p in (
                    self.noop_elimination,
                    self.post_cleanup,
                    self.clone_elimination,
                    self.defunctionalize,
                )
                if p is not None
            ],
            "compile_range": str(get_pass_context().compile_range),
        }
        return InductorPass.hash_dict(state)
