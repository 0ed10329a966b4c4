"""Fuse SiLU-and-multiply of the gate/up halves into ``template::silu_and_mul``.

Pattern (what vLLM's ``SiluAndMul.forward_native`` traces to)::

    gate = x[..., :d]; up = x[..., d:]       # aten.slice, d = x.shape[-1] // 2
    out = aten.silu(gate) * up               # aten.mul

becomes ``out = torch.ops.template.silu_and_mul(x)``: one kernel reading ``x``
once instead of three ops and two intermediates. The match is structural (any
``d``, any dtype): both slices must cover the two exact halves of the same
tensor along its last dimension, in that order. ``silu(a) * b`` of unrelated
tensors, swapped halves or other activations are left alone.

It runs in the fusion-only stage, whose graphs keep ``aten.silu`` whole. The
graph stage leaves the pattern to Inductor, which generates one loop for
it (``SiluAndMulFusionPass.stages``).
"""

from __future__ import annotations

import torch
from torch import fx
from vllm.compilation.passes.vllm_inductor_pass import VllmInductorPass
from vllm.config import VllmConfig

import vllm_platform_template.compiler.ops  # noqa: F401  (registers torch.ops.template)

aten = torch.ops.aten


def _last_dim_slice(node: object) -> tuple[fx.Node, int, int] | None:
    """``(source, start, end)`` if ``node`` slices the last dimension of its source."""
    if not isinstance(node, fx.Node) or node.target is not aten.slice.Tensor:
        return None
    source, dim, start, end = ([*list(node.args), 0, None, None])[:4]
    if not isinstance(source, fx.Node) or "val" not in source.meta:
        return None
    ndim = source.meta["val"].dim()
    if dim not in (ndim - 1, -1) or not isinstance(start, int):
        return None
    size = source.meta["val"].shape[-1]
    if end is None or (isinstance(end, int) and end > size):
        end = size
    if not isinstance(end, int):
        return None
    return source, start, end


def match_silu_and_mul(mul: fx.Node) -> fx.Node | None:
    """The tensor ``x`` if ``mul`` is ``silu(x[..., :d]) * x[..., d:]``, else None."""
    if mul.op != "call_function" or mul.target is not aten.mul.Tensor or len(mul.args) != 2:
        return None
    silu, up = mul.args
    if not isinstance(silu, fx.Node) or silu.target is not aten.silu.default:
        silu, up = up, silu
    if not isinstance(silu, fx.Node) or silu.target is not aten.silu.default:
        return None
    gate = _last_dim_slice(silu.args[0])
    upper = _last_dim_slice(up)
    if gate is None or upper is None or gate[0] is not upper[0]:
        return None
    source = gate[0]
    size = source.meta["val"].shape[-1]
    if not isinstance(size, int) or size % 2:
        return None
    d = size // 2
    if (gate[1], gate[2]) != (0, d) or (upper[1], upper[2]) != (d, size):
        return None
    return source


class SiluAndMulFusionPass(VllmInductorPass):
    """``silu(x[..., :d]) * x[..., d:]`` -> ``template.silu_and_mul(x)``."""

    name = "silu_and_mul"
    # Only without code generation: under Inductor the three ops already become one
    # generated loop, and an opaque kernel call would keep Inductor from fusing it
    # with its neighbours.
    stages = ("fusion_only",)

    def __init__(self, config: VllmConfig) -> None:
        super().__init__(config)
        self.matched_count = 0

    @VllmInductorPass.time_and_log  # type: ignore[arg-type]
    def __call__(self, graph: fx.Graph) -> None:
        self.matched_count = 0
        for node in list(graph.nodes):
            source = match_silu_and_mul(node)
            if source is None:
                continue
            with graph.inserting_before(node):
                one_op = graph.call_function(torch.ops.template.silu_and_mul.default, (source,))
            one_op.meta["val"] = node.meta.get("val")
            node.replace_all_uses_with(one_op)
            graph.erase_node(node)
            self.matched_count += 1
        graph.eliminate_dead_code()
