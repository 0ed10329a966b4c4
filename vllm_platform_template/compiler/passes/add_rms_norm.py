"""Fuse a residual add followed by ``rms_norm`` into ``fused_add_rms_norm``.

Pattern (vLLM IR level)::

    residual_out = x + residual            # aten.add
    out = vllm_ir.rms_norm(residual_out, weight, eps)

becomes ``out, residual_out = vllm_ir.fused_add_rms_norm(x, residual, weight, eps)``.

The replacement is the *functional* (default) overload. Whether the lowered
kernel may then write into ``x``/``residual`` is decided downstream by vLLM's
donation machinery: the IR lowering pass inserts clones for an in-place
provider (``func_impl_fn``) and ``UnsafeCloneEliminationPass`` removes a clone
only when the cloned value is dead afterwards or is a graph input that
``VllmIRInplaceFunctionalizationPass`` recorded as donated (a
``maybe_inplace`` argument). So inputs that are still used keep their values.

vLLM's own Llama already calls ``fused_add_rms_norm`` inside ``RMSNorm``; this
pattern appears where models (or vLLM's Transformers backend) add the residual
themselves before a plain ``RMSNorm``.
"""

from __future__ import annotations

from itertools import product

import torch
import vllm.ir.ops
from vllm.compilation.passes.vllm_inductor_pass import (
    VllmFusionPatternMatcherPass,
    VllmPatternReplacement,
)
from vllm.config import VllmConfig

EPSILONS = (1e-5, 1e-6)


class AddRMSNormPattern(VllmPatternReplacement):
    def __init__(self, epsilon: float, residual_first: bool) -> None:
        self.epsilon = epsilon
        self.residual_first = residual_first

    @property
    def pattern(self):
        def _pattern(x: torch.Tensor, residual: torch.Tensor, weight: torch.Tensor):
            summed = residual + x if self.residual_first else x + residual
            return vllm.ir.ops.rms_norm(summed, weight, self.epsilon), summed

        return _pattern

    @property
    def replacement(self):
        def _replacement(x: torch.Tensor, residual: torch.Tensor, weight: torch.Tensor):
            return vllm.ir.ops.fused_add_rms_norm(x, residual, weight, self.epsilon)

        return _replacement

    def get_inputs(self) -> list[torch.Tensor]:
        # Traced on the meta device: registering the pattern needs no accelerator.
        return [
            torch.empty(5, 16, dtype=torch.float32, device="meta"),
            torch.empty(5, 16, dtype=torch.float32, device="meta"),
            torch.empty(16, dtype=torch.float32, device="meta"),
        ]


class AddRMSNormFusionPass(VllmFusionPatternMatcherPass):
    """``add`` + ``rms_norm`` -> ``fused_add_rms_norm`` (one read of the residual stream)."""

    name = "add_rms_norm"
    stages = ("fusion_only", "graph")

    def __init__(self, config: VllmConfig) -> None:
        super().__init__(config, "template_add_rms_norm_fusion")
        for epsilon, residual_first in product(EPSILONS, (True, False)):
            self.register(AddRMSNormPattern(epsilon, residual_first))
