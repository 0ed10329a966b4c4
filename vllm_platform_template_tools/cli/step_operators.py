"""``vllm-template doctor``: one decode step's operators on the device, and what serves each.

One decode token through one small Llama layer, run on the diagnosed device the way the
plugin runs it: the embedding, projections and greedy sampling as vLLM's layers call torch;
the norms, rotary embedding and gated activation through the device folder's kernel table
(``device.kernel_table``; vLLM's native code where an entry is missing); the KV write and
attention through the kernels ``TEMPLATE_ATTN`` would choose
(``attention.kernel_choice.resolve_attention_kernels``). A ``TorchDispatchMode`` records each
operator that reaches the device, and the dispatcher's own tables for the device's dispatch
key say what serves it: the extension's own kernel, a torch composite (it runs as other
operators), the extension's backend fallback (on the PrivateUse1 test device: the CPU, on
host views of the device's memory), or nothing (the step fails there). What a port's
extension must implement next is the fallback's list. Device-neutral: any device torch
sees; no engine starts (about a second).
"""

from __future__ import annotations

import functools
from collections import Counter
from collections.abc import Callable
from typing import Any

# A small Llama layer (grouped-query attention) and one request of CONTEXT tokens, its
# last token decoded.
HEADS, KV_HEADS, HEAD_SIZE, HIDDEN, INTERMEDIATE, VOCAB = 4, 2, 64, 256, 512, 512
BLOCK_SIZE, NUM_BLOCKS, CONTEXT, EPSILON = 16, 4, 8, 1e-6

OWN = "the device's kernel"
COMPOSITE = "torch composite"
FALLBACK = "the extension's fallback"
MISSING = "no kernel"
COMPOSITE_KEYS = (
    "CompositeExplicitAutograd",
    "CompositeExplicitAutogradNonFunctional",
    "CompositeImplicitAutograd",
)


@functools.cache
def served_by(operator: str, dispatch_key: str) -> tuple[str, str | None]:
    """What the dispatcher runs for ``operator`` (``ns::name.overload``) on ``dispatch_key``,
    and for a composite its alias key (the kernel that runs the other operators)."""
    import torch

    if torch._C._dispatch_has_kernel_for_dispatch_key(operator, dispatch_key):
        return OWN, None
    for key in COMPOSITE_KEYS:
        if torch._C._dispatch_has_kernel_for_dispatch_key(operator, key):
            return COMPOSITE, key
    fallback = torch._C._dispatch_has_backend_fallback(getattr(torch._C.DispatchKey, dispatch_key))
    return (FALLBACK if fallback else MISSING), None


def survey(device_type: str) -> dict[str, Any]:
    """``{"device", "dispatch_key", "operators": {name: {"calls", "served_by"}}}`` for one
    decode step on ``device_type`` (a composite's operators listed as they run), or
    ``{"skipped": why}``."""
    import torch

    from vllm_platform_template.device import device_for, kernel_table

    current = torch.accelerator.current_accelerator() if torch.accelerator.is_available() else None
    if device_type != "cpu" and (current is None or current.type != device_type):
        return {"skipped": f"torch sees no {device_type} device"}
    device = device_for(device_type)
    if device is None:
        return {"skipped": f"the plugin has no folder for {device_type}"}
    device.load_libraries()  # as Platform.import_kernels does in the worker
    table = kernel_table(device_type)
    if table is None:
        return {"skipped": f"the {device_type} folder's kernels cannot run here"}
    dispatch_key = torch._C._dispatch_key_for_device(device_type)
    step = _decode_step(torch, table, torch.device(device_type))
    calls, served = _record(step, dispatch_key)
    return {
        "device": device_type,
        "dispatch_key": dispatch_key,
        "operators": {
            name: {"calls": count, "served_by": served[name]}
            for name, count in sorted(calls.items(), key=lambda item: (-item[1], item[0]))
        },
    }


def _record(step: Callable[[], None], dispatch_key: str) -> tuple[Counter[str], dict[str, str]]:
    """Run ``step``, counting each operator that reaches the device and what serves it. A
    composite runs under the recorder again, so that the operators it runs are seen."""
    import torch
    from torch.utils._python_dispatch import TorchDispatchMode

    calls: Counter[str] = Counter()
    served: dict[str, str] = {}

    class Recorder(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            name = func.name()
            calls[name] += 1
            served[name], composite = served_by(name, dispatch_key)
            kwargs = kwargs or {}
            if composite is None:
                return func(*args, **kwargs)
            seen = calls.copy()
            try:
                with self:
                    return func._op_dk(getattr(torch._C.DispatchKey, composite), *args, **kwargs)
            except RuntimeError:  # a part the mode cannot pass on (a wrapped scalar)
                calls.clear()
                calls.update(seen)
                return func(*args, **kwargs)  # whole again, its parts unseen

    with Recorder():
        step()
    return calls, served


def _decode_step(torch: Any, table: Any, device: Any) -> Callable[[], None]:
    from vllm_platform_template.attention.kernel_choice import resolve_attention_kernels
    from vllm_platform_template.reference_kernels.paged_attention.contract import (
        AttentionLayout,
    )
    from vllm_platform_template.reference_kernels.paged_attention.reference import (
        split_kv_cache,
    )
    from vllm_platform_template.reference_kernels.reference import (
        rotary_embedding,
        silu_and_mul,
    )

    f = torch.nn.functional
    dtype = torch.float32
    generator = torch.Generator().manual_seed(0)

    def weights(*shape: int) -> Any:  # made on the host, copied in before the step
        return (torch.randn(*shape, generator=generator) / shape[-1] ** 0.5).to(device)

    embedding, lm_head = weights(VOCAB, HIDDEN), weights(VOCAB, HIDDEN)
    qkv_proj = weights((HEADS + 2 * KV_HEADS) * HEAD_SIZE, HIDDEN)
    o_proj, down_proj = weights(HIDDEN, HEADS * HEAD_SIZE), weights(HIDDEN, INTERMEDIATE)
    gate_up_proj = weights(2 * INTERMEDIATE, HIDDEN)
    norm = torch.ones(HIDDEN).to(device)
    angles = torch.outer(torch.arange(64.0), 1e4 ** (-torch.arange(0, HEAD_SIZE, 2) / HEAD_SIZE))
    cos_sin_cache = torch.cat([angles.cos(), angles.sin()], dim=-1).to(device)
    kv_cache = torch.zeros(NUM_BLOCKS, KV_HEADS, BLOCK_SIZE, 2 * HEAD_SIZE).to(device)
    key_cache, value_cache = split_kv_cache(kv_cache)
    token = torch.tensor([3]).to(device)
    positions = torch.tensor([CONTEXT - 1]).to(device)
    slot_mapping = torch.tensor([CONTEXT - 1]).to(device)
    block_table = torch.arange(NUM_BLOCKS, dtype=torch.int32).reshape(1, -1).to(device)
    seq_lens = torch.tensor([CONTEXT], dtype=torch.int32).to(device)
    query_start_loc = torch.tensor([0, 1], dtype=torch.int32).to(device)
    attention = resolve_attention_kernels(device.type, "auto", dtype, BLOCK_SIZE, HEAD_SIZE)
    layout = AttentionLayout(HEADS, KV_HEADS, HEAD_SIZE, dtype, BLOCK_SIZE)
    planner = attention.planner(layout, 1, device)

    def step() -> None:  # what the recorder sees: the step, its inputs made before
        x = f.embedding(token, embedding)
        h = table.rms_norm(x, norm, EPSILON)
        q, k, v = f.linear(h, qkv_proj).split(
            [HEADS * HEAD_SIZE, KV_HEADS * HEAD_SIZE, KV_HEADS * HEAD_SIZE], dim=-1
        )
        q, k, v = q.contiguous(), k.contiguous(), v.contiguous()
        if table.rotary_embedding_ is not None and table.rotary_ready():
            table.rotary_embedding_(positions, q, k, HEAD_SIZE, cos_sin_cache, True)
        else:  # vLLM's native rotary embedding
            q, k = rotary_embedding(positions, q, k, HEAD_SIZE, cos_sin_cache, True)
        k3, v3 = k.view(1, KV_HEADS, HEAD_SIZE), v.view(1, KV_HEADS, HEAD_SIZE)
        attention.write_kv(k3, v3, key_cache, value_cache, slot_mapping)
        plan = planner.plan(
            num_reqs=1,
            num_tokens=1,
            max_query_len=1,
            seq_lens=seq_lens,
            query_start_loc=query_start_loc,
        )
        out = torch.empty(1, HEADS, HEAD_SIZE, device=device)
        attention.attend(
            q.view(1, HEADS, HEAD_SIZE),
            key_cache,
            value_cache,
            out,
            block_table=block_table,
            seq_lens=seq_lens,
            query_start_loc=query_start_loc,
            scale=HEAD_SIZE**-0.5,
            plan=plan,
            key=k3,
            value=v3,
        )
        h, residual = table.fused_add_rms_norm(f.linear(out.view(1, -1), o_proj), x, norm, EPSILON)
        gate_up = f.linear(h, gate_up_proj)
        activated = (table.silu_and_mul or silu_and_mul)(gate_up)  # else vLLM's native
        h, _ = table.fused_add_rms_norm(f.linear(activated, down_proj), residual, norm, EPSILON)
        f.linear(table.rms_norm(h, norm, EPSILON), lm_head).argmax(dim=-1).cpu()

    return step
