"""Turn safe ``auto_functionalized`` nodes back into in-place kernel calls.

AOTAutograd wraps every op that mutates its arguments (vLLM's CPU kernels take
their output buffer as an argument, e.g. ``torch.ops._C.onednn_mm(out, ...)``
for the packed GEMM) in ``auto_functionalized``, which copies the mutated
buffers. vLLM's ``FixFunctionalizationPass`` removes those copies from a fixed
table of vLLM's compiled ops - and on a CPU build it fails with ``AttributeError``
as soon as it meets an op outside the table, because it looks up ops the CPU build
lacks, such as
``torch.ops._C.fused_add_rms_norm_static_fp8_quant``.

This pass is schema-driven instead: a node is rewritten to call the op in
place when every buffer it mutates is a fresh allocation (``empty``-like) or
an intermediate with no other user and no aliasing (not a graph input, not a
view). Anything else stays functional (correct, one copy).
"""

from __future__ import annotations

import torch
from torch import fx
from torch._higher_order_ops.auto_functionalize import auto_functionalized
from vllm.compilation.passes.fx_utils import is_func
from vllm.compilation.passes.utility.fix_functionalization import FixFunctionalizationPass
from vllm.compilation.passes.vllm_inductor_pass import VllmInductorPass

aten = torch.ops.aten
FRESH_ALLOCATIONS = (
    aten.empty.memory_format,
    aten.empty_like.default,
    aten.empty_strided.default,
    aten.new_empty.default,
    aten.zeros.default,
    aten.zeros_like.default,
)


def mutated_arg_names(op: torch._ops.OpOverload) -> list[str]:
    """Names of the arguments ``op`` writes to, in schema order."""
    return [
        a.name for a in op._schema.arguments if a.alias_info is not None and a.alias_info.is_write
    ]


def _writable_in_place(arg: object, node: fx.Node) -> bool:
    if not isinstance(arg, fx.Node):
        return False
    if arg.op == "call_function" and arg.target in FRESH_ALLOCATIONS:
        return len(arg.users) == 1
    if arg.op != "call_function" or len(arg.users) != 1:
        return False
    target = arg.target
    schema = getattr(target, "_schema", None)
    returns_view = schema is not None and any(r.alias_info is not None for r in schema.returns)
    return not returns_view and target is not auto_functionalized and next(iter(arg.users)) is node


class DefunctionalizePass(FixFunctionalizationPass):
    """Schema-driven replacement of vLLM's ``FixFunctionalizationPass`` (see module docstring)."""

    @VllmInductorPass.time_and_log  # type: ignore[arg-type]
    def __call__(self, graph: fx.Graph) -> None:
        self.nodes_to_remove: list[fx.Node] = []
        for node in graph.nodes:
            if not is_func(node, auto_functionalized):
                continue
            op = node.args[0]
            names = mutated_arg_names(op)
            if not names or not all(_writable_in_place(node.kwargs.get(n), node) for n in names):
                continue
            self.defunctionalize(graph, node, {i + 1: n for i, n in enumerate(names)})
        for node in self.nodes_to_remove:
            graph.erase_node(node)
        self.nodes_to_remove.clear()
