"""One online-softmax step over a tile of paged keys: what both attention kernels repeat.

:func:`_attend_tile` gathers a tile of keys and values through the block table
(the contract's layout, plain interior), scores them against the rows of a query
tile, and folds them into the running maximum, sum and accumulator (flash
attention's online softmax, in float32, logits in log2 units). Keys outside the
sequence, past the table row or in blocks outside the cache are never loaded.
Device functions only (``@triton.jit``, called from the prefill and decode
kernels); no vLLM hook of their own.
Proven by ``tests/devices/gpu/speed_tier/test_triton_kernels_interpret.py`` and, on
the device, ``tests/devices/gpu/speed_tier/test_triton_kernels.py``.
"""

from __future__ import annotations

import triton
import triton.language as tl

LOG2E = 1.4426950408889634
"""log2(e): the kernels' logits are in log2 units (``qk_scale = scale * LOG2E``, ``exp2``)."""


@triton.jit
def _dot(a, b, IEEE_DOT: tl.constexpr):
    """``a @ b`` in float32; full-precision products for float32 inputs (no TF32)."""
    if IEEE_DOT:
        return tl.dot(a, b, input_precision="ieee")
    else:
        return tl.dot(a, b)


@triton.jit
def _softmax_step(s, m_i, l_i):
    """Fold logits ``s`` [rows, keys] (log2 units, -inf where hidden) into the running
    maximum ``m_i`` and sum ``l_i``: returns the new maximum and sum, the keys' weights
    ``p`` and ``alpha``, the factor that rescales what was accumulated so far."""
    m_new = tl.maximum(m_i, tl.max(s, axis=1))
    # Rows with nothing visible yet keep m = -inf; shift them by 0 to avoid inf - inf.
    m_safe = tl.where(m_new == float("-inf"), 0.0, m_new)
    p = tl.exp2(s - m_safe[:, None])
    alpha = tl.exp2(m_i - m_safe)
    return m_new, l_i * alpha + tl.sum(p, axis=1), p, alpha


@triton.jit
def _attend_tile(
    q,
    m_i,
    l_i,
    acc,
    kpos,
    k_in,
    visible,
    bt_row,
    bt_cols,
    num_blocks,
    k_head,
    kc_block_stride,
    kc_tok_stride,
    v_head,
    vc_block_stride,
    vc_tok_stride,
    block_size,
    d,
    d_ok,
    qk_scale,
    IEEE_DOT: tl.constexpr,
    MASKED: tl.constexpr,
):
    """One online-softmax step over keys ``kpos``.

    ``k_in``: keys to load (inside the sequence); the others' block-table entry,
    K and V are not read (``other=0``), and neither are entries past the table
    row or block ids outside the cache. ``visible``: [rows, keys] attention
    mask, applied when ``MASKED`` (tiles that every row sees whole skip it).
    Logits are in log2 units (``qk_scale`` includes log2(e)).
    """
    bt_col = kpos // block_size
    k_in = k_in & (bt_col < bt_cols)
    blk = tl.load(bt_row + bt_col, mask=k_in, other=0).to(tl.int64)
    k_in = k_in & (blk >= 0) & (blk < num_blocks)
    row = kpos % block_size
    k_off = blk * kc_block_stride + row * kc_tok_stride
    k_t = tl.load(
        k_head + k_off[None, :] + d[:, None], mask=k_in[None, :] & d_ok[:, None], other=0.0
    )
    s = _dot(q, k_t, IEEE_DOT) * qk_scale
    if MASKED:
        s = tl.where(visible & k_in[None, :], s, float("-inf"))
    m_new, l_i, p, alpha = _softmax_step(s, m_i, l_i)
    v_off = blk * vc_block_stride + row * vc_tok_stride
    v = tl.load(v_head + v_off[:, None] + d[None, :], mask=k_in[:, None] & d_ok[None, :], other=0.0)
    acc = acc * alpha[:, None] + _dot(p.to(v.dtype), v, IEEE_DOT)
    return m_new, l_i, acc
