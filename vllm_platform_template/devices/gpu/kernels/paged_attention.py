"""Paged attention over the plugin's KV cache: the plans and the checked API.

The cache layout (plain interior) and the argument rules are the contract's
(``reference_kernels/paged_attention/contract.py``), the semantics the
reference's (``reference_kernels/paged_attention/reference.py``):

- :func:`kv_write.reshape_and_cache_` writes ``key``/``value`` ``[T, Hkv, D]``
  at ``slot_mapping[:T]``; slots outside the cache (-1 for padding) are skipped.
- :func:`paged_attention` computes causal attention for a mixed batch of
  prefills and decodes. Softmax is online (``attention_tile.py``), accumulated in
  float32; key positions past the causal bound or ``seq_len`` are never loaded,
  so stale data (even NaN) in unused cache slots cannot leak into the output.

Two kernels do the attention: the general one (``attention_prefill.py``) and, when
every request decodes one token (``max_query_len == 1``), the split-KV decode
kernel and its merge (``attention_decode.py``).

What is launched depends on the batch shape only - requests, tokens and the
query-length class (``max_query_len == 1`` means all-decode; longer ones pick the
general kernel's tile) - never on the sequence lengths, which the kernels read
from ``seq_lens``/``query_start_loc`` on the device. A graph captured for a shape
therefore replays exactly what an eager step of that shape launches, for any
lengths. :class:`TritonAttentionPlanner` decides each shape's
:class:`AttentionPlan` once (kernel, grid, constants, split count, scratch views)
and :func:`kv_write.write_kv_unchecked` / :func:`attend_unchecked` launch it
through ``launch.Launch`` (no per-call argument binding by Triton); the public
:func:`kv_write.reshape_and_cache_` and :func:`paged_attention` check their arguments
against the contract of every path (``reference_kernels/paged_attention/contract.py``) first.

vLLM hook served: the attention kernels of ``TEMPLATE_ATTN``
(``Platform.get_attn_backend_cls``), through ``attention_kernels.py``. Proven by
``tests/devices/gpu/speed_tier/test_triton_kernels_interpret.py`` and, on the
device, ``tests/devices/gpu/speed_tier/test_triton_kernels.py``.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

import torch

from vllm_platform_template.devices.gpu.kernels import (
    check_last_dim_contiguous,
    check_launch_device,
    is_interpreted,
    next_power_of_2,
)
from vllm_platform_template.devices.gpu.kernels.attention_decode import (
    DecodeConfig,
    _paged_decode_combine_kernel,
    _paged_decode_kernel,
    decode_config,
    num_multiprocessors,
)
from vllm_platform_template.devices.gpu.kernels.attention_prefill import (
    AttentionLaunchConfig,
    _paged_attention_kernel,
    _prefill_attention_kernel,
    prefill_launch_config,
    prefill_tile,
)
from vllm_platform_template.devices.gpu.kernels.attention_tile import LOG2E
from vllm_platform_template.devices.gpu.kernels.kv_write import (
    write_kv_unchecked,
)
from vllm_platform_template.devices.gpu.kernels.launch import Launch
from vllm_platform_template.reference_kernels.paged_attention.contract import (
    AttentionLayout,
    check_attention,
)

__all__ = [
    "AttentionPlan",
    "TritonAttentionPlanner",
    "attend_unchecked",
    "paged_attention",
]


# --------------------------------------------------------------------------
# Plans: how one batch shape is launched, decided once
# --------------------------------------------------------------------------


@dataclass(frozen=True)
class AttentionPlan:
    """How one batch shape (requests, tokens, query-length class) is launched.

    Made once per shape by :class:`TritonAttentionPlanner` and shared by every
    layer of every step of that shape: the kernel, grid and constants, the decode
    split count and the split scratch (views of the planner's one buffer).
    """

    num_reqs: int
    num_tokens: int
    decode: bool
    num_splits: int
    attention: Launch | None
    """None: nothing to attend for (no tokens or requests)."""
    combine: Launch | None = None
    part_acc: torch.Tensor | None = None
    part_m: torch.Tensor | None = None
    part_l: torch.Tensor | None = None
    prefill: Launch | None = None
    """Batches with a query longer than one token, when the step's own ``key``/``value``
    are given: the prefill kernel (new keys read where the step holds them)."""


class TritonAttentionPlanner:
    """Launch plans of one KV-cache group, made once per batch shape.

    Everything a step's shape fixes is decided when the shape is first seen and
    cached: the kernel (split-KV decode when every request decodes one token, the
    general kernel otherwise), its grid, tile and constants, the split count
    (:func:`decode_num_splits`: requests, KV heads, multiprocessors), the launch
    parameters (``attention_decode.decode_config``: from the same three, unless
    ``decode`` forces others) and the split scratch, views of one buffer allocated
    here for the largest split decode of up to ``max_num_reqs`` requests.
    :meth:`plan` allocates nothing, copies nothing to the host and reads no tensor,
    so it may run while a graph is captured. :meth:`warm_up` compiles every variant a
    step can launch, once per process and layout (the engine's planners do, so no
    Triton compile happens while serving; the public :func:`paged_attention` does
    not, as it plans each call anew).
    """

    def __init__(
        self,
        layout: AttentionLayout,
        max_num_reqs: int,
        device: torch.device,
        *,
        decode_splits: int | None = None,
        decode: DecodeConfig | None = None,
    ) -> None:
        if layout.num_kv_heads <= 0 or layout.num_heads % layout.num_kv_heads != 0:
            raise ValueError(
                f"query heads ({layout.num_heads}) must be a multiple of KV heads "
                f"({layout.num_kv_heads})"
            )
        self.layout = layout
        self.device = torch.device(device)
        self.max_num_reqs = max(1, max_num_reqs)
        self.group = layout.num_heads // layout.num_kv_heads
        self.block_d = max(16, next_power_of_2(layout.head_size))
        self.element_size = torch.empty((), dtype=layout.dtype).element_size()
        self.ieee = layout.dtype == torch.float32
        self.num_multiprocessors = num_multiprocessors(self.device)
        self.forced_splits = None if decode_splits is None else max(1, int(decode_splits))
        self.forced_decode = decode
        rows = max(r * self.num_splits(r) for r in range(1, self.max_num_reqs + 1))
        per_row = layout.num_heads * (layout.head_size + 2)
        self.scratch = torch.empty(rows * per_row, dtype=torch.float32, device=self.device)
        self._plans: dict[tuple[int, int, int, int], AttentionPlan] = {}

    def warm_up(self) -> None:
        """Compile every kernel variant a step of this layout can launch (once per process
        and layout; nothing to compile under Triton's interpreter)."""
        if not is_interpreted(_paged_decode_kernel):
            _warm_up(self)

    def decode_config(self, num_reqs: int) -> DecodeConfig:
        """The decode launch parameters of ``num_reqs`` requests (the batch shape's)."""
        if self.forced_decode is not None:
            return self.forced_decode
        return decode_config(
            self.block_d, num_reqs, self.layout.num_kv_heads, self.num_multiprocessors
        )

    def num_splits(self, num_reqs: int) -> int:
        if self.forced_splits is not None:
            return self.forced_splits
        return self.decode_config(num_reqs).num_splits(
            num_reqs, self.layout.num_kv_heads, self.num_multiprocessors
        )

    def plan(
        self,
        *,
        num_reqs: int,
        num_tokens: int,
        max_query_len: int,
        seq_lens: torch.Tensor | None = None,
        query_start_loc: torch.Tensor | None = None,
    ) -> AttentionPlan:
        """The plan of this batch shape (``seq_lens``/``query_start_loc`` are not read)."""
        key = (num_reqs, num_tokens, *self._query_length_class(max_query_len))
        plan = self._plans.get(key)
        if plan is None:
            if len(self._plans) >= 1024:  # eager prefills of many lengths: stay bounded
                self._plans.clear()
            plan = self._plans[key] = self._make_plan(num_reqs, num_tokens, max_query_len)
        return plan

    def _query_length_class(self, max_query_len: int) -> tuple[int, int]:
        """What of ``max_query_len`` a plan depends on: the rows of the general kernel's
        and of the prefill kernel's tiles (1: the decode kernel; 0: nothing to attend)."""
        if max_query_len <= 1:
            return max_query_len, max_query_len
        tile = prefill_tile(max_query_len, self.layout.head_size, self.element_size)
        return self._prefill_config(max_query_len).block_m, tile.block_m

    def _prefill_config(self, max_query_len: int) -> AttentionLaunchConfig:
        return prefill_launch_config(
            max_query_len, self.group, self.layout.head_size, self.element_size
        )

    def _make_plan(self, num_reqs: int, num_tokens: int, max_query_len: int) -> AttentionPlan:
        if num_reqs > self.max_num_reqs:
            raise ValueError(
                f"this attention planner serves at most {self.max_num_reqs} requests a step, "
                f"got {num_reqs}"
            )
        hq, hkv, d = self.layout.num_heads, self.layout.num_kv_heads, self.layout.head_size
        if num_tokens == 0 or num_reqs == 0 or max_query_len <= 0:
            return AttentionPlan(num_reqs, num_tokens, False, 0, None)
        if max_query_len == 1:
            config = self.decode_config(num_reqs)
            splits = self.num_splits(num_reqs)
            direct = splits == 1
            # A forced split count (tests, tuning) splits even short contexts.
            min_keys = config.tile_n if self.forced_splits is not None else config.min_keys
            decode = Launch(
                _paged_decode_kernel,
                (num_reqs, hkv, splits),
                {
                    "GROUP": self.group,
                    "BLOCK_G": max(16, next_power_of_2(self.group)),
                    "TILE_N": config.tile_n,
                    "BLOCK_D": self.block_d,
                    "IEEE_DOT": self.ieee,
                    "DIRECT": direct,
                    "MIN_KEYS": min_keys,
                },
                num_warps=config.num_warps,
                num_stages=config.num_stages,
            )
            if direct:
                return AttentionPlan(num_reqs, num_tokens, True, 1, decode)
            n = num_reqs * hq * splits
            part_acc = self.scratch[: n * d].view(num_reqs, hq, splits, d)
            part_m = self.scratch[n * d : n * (d + 1)].view(num_reqs, hq, splits)
            part_l = self.scratch[n * (d + 1) : n * (d + 2)].view(num_reqs, hq, splits)
            combine = Launch(
                _paged_decode_combine_kernel,
                (num_reqs, hq, 1),
                {"BLOCK_S": next_power_of_2(splits), "BLOCK_D": next_power_of_2(d)},
                num_warps=config.combine_warps,
                num_stages=3,
            )
            return AttentionPlan(
                num_reqs, num_tokens, True, splits, decode, combine, part_acc, part_m, part_l
            )
        cfg = self._prefill_config(max_query_len)
        block_q = cfg.block_m // self.group
        general = Launch(
            _paged_attention_kernel,
            (num_tokens // block_q + num_reqs, hkv, 1),
            {
                "GROUP": self.group,
                "BLOCK_M": cfg.block_m,
                "BLOCK_Q": block_q,
                "TILE_N": cfg.tile_n,
                "BLOCK_D": self.block_d,
                "IEEE_DOT": self.ieee,
            },
            num_warps=cfg.num_warps,
            num_stages=cfg.num_stages,
        )
        tile = prefill_tile(max_query_len, self.layout.head_size, self.element_size)
        prefill = Launch(
            _prefill_attention_kernel,
            (num_tokens // tile.block_m + num_reqs, hq, 1),
            {
                "GROUP": self.group,
                "BLOCK_M": tile.block_m,
                "BLOCK_N": tile.block_n,
                "BLOCK_D": self.block_d,
                "IEEE_DOT": self.ieee,
            },
            num_warps=tile.num_warps,
            num_stages=tile.num_stages,
        )
        return AttentionPlan(num_reqs, num_tokens, False, 0, general, prefill=prefill)


def attend_unchecked(
    query: torch.Tensor,
    key_cache: torch.Tensor,
    value_cache: torch.Tensor,
    output: torch.Tensor,
    block_table: torch.Tensor,
    seq_lens: torch.Tensor,
    query_start_loc: torch.Tensor,
    scale: float,
    plan: AttentionPlan,
    key: torch.Tensor | None = None,
    value: torch.Tensor | None = None,
) -> None:
    """:func:`paged_attention` without its checks, launched as ``plan`` says.

    Launches exactly what ``plan`` fixed; the lengths are read on the device, so
    this is what a graph captures and replays for any lengths of the same shape.
    ``key``/``value`` ``[T, Hkv, D]``: the step's new keys and values (already in
    the cache); given, a prefill plan reads them there (the prefill kernel) instead
    of through the block table (the general kernel).
    """
    if plan.attention is None:
        return
    qs, os_, kcs, vcs = query.stride(), output.stride(), key_cache.stride(), value_cache.stride()
    qk_scale = float(scale) * LOG2E
    layout = (
        qs[0],
        qs[1],
        kcs[0],
        kcs[1],
        kcs[2],
        vcs[0],
        vcs[1],
        vcs[2],
        os_[0],
        os_[1],
        block_table.stride(0),
        block_table.shape[1],
        key_cache.shape[0],
    )
    if plan.decode:
        if plan.combine is None:
            parts: tuple[torch.Tensor, ...] = (output, output, output)  # unused (direct)
        else:
            assert plan.part_acc is not None and plan.part_m is not None
            assert plan.part_l is not None
            parts = (plan.part_acc, plan.part_m, plan.part_l)
        plan.attention(
            (query, key_cache, value_cache, output, *parts, block_table, seq_lens, query_start_loc),
            (
                *layout,
                query.shape[1],
                plan.num_splits,
                key_cache.shape[2],
                query.shape[2],
                qk_scale,
            ),
        )
        if plan.combine is not None:
            plan.combine(
                (*parts, output, query_start_loc),
                (os_[0], os_[1], query.shape[1], plan.num_splits, query.shape[2]),
            )
        return
    if plan.prefill is not None and key is not None and value is not None:
        ks, vs = key.stride(), value.stride()
        plan.prefill(
            (query, key, value, key_cache, value_cache, output, block_table, seq_lens,
             query_start_loc),
            (qs[0], qs[1], ks[0], ks[1], vs[0], vs[1], *layout[2:], plan.num_reqs,
             key_cache.shape[2], query.shape[2], qk_scale),
        )  # fmt: skip
        return
    plan.attention(
        (query, key_cache, value_cache, output, block_table, seq_lens, query_start_loc),
        (*layout, plan.num_reqs, key_cache.shape[2], query.shape[2], qk_scale),
    )


def _warm_up(planner: TritonAttentionPlanner) -> None:
    """Compile every kernel variant a step of ``planner``'s layout can launch, once.

    Variants: the KV write; the decode kernel direct and split, with a merge per
    distinct power-of-two split bound; the prefill kernel (what an engine's steps
    launch, the step's keys given) at each tile its query lengths can pick. Tiny
    dummy tensors of the layout's dtype and strides class compile what the real
    steps will find in Triton's cache.
    """
    layout = planner.layout
    key = (
        layout,
        planner.device,
        planner.max_num_reqs,
        planner.forced_splits,
        planner.forced_decode,
    )
    if key in _WARMED:
        return
    hq, hkv, d, bs = layout.num_heads, layout.num_kv_heads, layout.head_size, layout.block_size
    dev, dtype = planner.device, layout.dtype
    kv_cache = torch.zeros((2, hkv, bs, 2 * d), dtype=dtype, device=dev)
    key_cache, value_cache = kv_cache.view(2, hkv, 2 * bs, d).chunk(2, dim=2)
    decode_reqs: dict[tuple[bool, int, DecodeConfig], int] = {}
    for r in range(1, planner.max_num_reqs + 1):
        splits = planner.num_splits(r)
        decode_reqs.setdefault((splits == 1, next_power_of_2(splits), planner.decode_config(r)), r)
    shapes = [(r, r, 1) for r in decode_reqs.values()]
    classes: dict[tuple[int, int], int] = {}
    for q_len in range(2, 129):
        classes.setdefault(planner._query_length_class(q_len), q_len)
    shapes += [(1, q_len, q_len) for q_len in classes.values()]
    for num_reqs, num_tokens, max_query_len in shapes:
        tokens = torch.zeros((num_tokens, hq + 2 * hkv, d), dtype=dtype, device=dev)
        query, k, v = tokens.split([hq, hkv, hkv], dim=1)
        q_lens = [num_tokens // num_reqs] * num_reqs
        qsl = torch.tensor([0, *itertools.accumulate(q_lens)], dtype=torch.int32, device=dev)
        seq_lens = torch.tensor(q_lens, dtype=torch.int32, device=dev)
        block_table = torch.zeros((num_reqs, 1), dtype=torch.int32, device=dev)
        slots = torch.full((num_tokens,), -1, dtype=torch.int64, device=dev)
        write_kv_unchecked(k, v, key_cache, value_cache, slots)
        plan = planner.plan(num_reqs=num_reqs, num_tokens=num_tokens, max_query_len=max_query_len)
        output = torch.empty_like(query)
        attend_unchecked(
            query, key_cache, value_cache, output, block_table, seq_lens, qsl, 1.0, plan, k, v
        )
    _WARMED.add(key)


_WARMED: set[tuple[object, ...]] = set()


# --------------------------------------------------------------------------
# Public, checked API
# --------------------------------------------------------------------------


def paged_attention(
    query: torch.Tensor,
    key_cache: torch.Tensor,
    value_cache: torch.Tensor,
    output: torch.Tensor,
    block_table: torch.Tensor,
    seq_lens: torch.Tensor,
    query_start_loc: torch.Tensor,
    scale: float,
    max_query_len: int,
    *,
    decode_splits: int | None = None,
) -> torch.Tensor:
    """Causal paged attention of ``query`` ``[T, Hq, D]`` into ``output``; returns ``output``.

    The contract of every path (``reference_kernels/paged_attention/contract.py``):
    ``output`` shaped like ``query``; caches ``[num_blocks, Hkv, block_size, D]``
    of the query's dtype, ``Hq % Hkv == 0``; ``block_table`` ``[num_reqs,
    max_blocks]``, ``seq_lens`` ``[num_reqs]`` (context + new tokens, already in
    the cache), ``query_start_loc`` ``[num_reqs + 1]``, all int32.
    ``max_query_len``: the batch's longest query (1 = every request decodes one
    token: the split-KV kernel). ``decode_splits``: force the decode kernel's
    split count (tests, tuning); None picks it from the batch shape. Each call
    plans anew (scratch allocated here); ``TEMPLATE_ATTN`` keeps a planner per
    KV-cache group instead (:class:`TritonAttentionPlanner`).
    Queries not owned by a request (past ``query_start_loc[-1]``) are left
    untouched in ``output``.
    """
    op = "paged_attention"
    check_attention(
        op, query, key_cache, value_cache, output, block_table, seq_lens, query_start_loc
    )
    for name, t in (
        ("query", query),
        ("output", output),
        ("key_cache", key_cache),
        ("value_cache", value_cache),
        ("block_table", block_table),
    ):
        check_last_dim_contiguous(op, name, t)
    check_launch_device(
        _paged_attention_kernel,
        op,
        query,
        key_cache,
        value_cache,
        output,
        block_table,
        seq_lens,
        query_start_loc,
    )
    num_tokens, num_heads, head_size = query.shape
    num_reqs = seq_lens.shape[0]
    layout = AttentionLayout(
        num_heads, key_cache.shape[1], head_size, query.dtype, key_cache.shape[2]
    )
    planner = TritonAttentionPlanner(layout, num_reqs, query.device, decode_splits=decode_splits)
    plan = planner.plan(num_reqs=num_reqs, num_tokens=num_tokens, max_query_len=max_query_len)
    attend_unchecked(
        query, key_cache, value_cache, output, block_table, seq_lens, query_start_loc, scale, plan
    )
    return output
