"""The paged KV-cache contract of ``TEMPLATE_ATTN`` and its plain-torch reference.

No module here imports vLLM. All paths share one paged KV-cache contract: the
per-layer cache vLLM allocates for ``KVCacheLayout.LBHNC`` is a tensor
``[num_blocks, num_kv_heads, block_size, 2 * head_size]``, split by
:func:`reference.split_kv_cache` into ``key_cache`` and ``value_cache`` views of
``[num_blocks, num_kv_heads, block_size, head_size]`` each. A token's slot is
``block_id * block_size + offset``; slot ``-1`` means "do not write" (padding).
Every path keeps one contract (``contract``): int32 index tensors, ``output`` shaped
like ``query``, and vLLM's slot contract for the KV write:
``slot_mapping`` is contiguous int64 with one entry per token to write, at most
the number of key rows; rows past it are padding and are not written.

- ``reference`` (here): the semantics in plain torch (causal, grouped-query
  heads, mixed prefill/decode batches, fp32 math). Reads and writes the *plain*
  interior layout (``key_cache[b, h, t]`` is token ``t``'s key). Runs on any device.
- ``contract`` (here): that contract, its checks and ``AttentionLayout`` (what is
  fixed per KV-cache group); the public kernel functions check every call,
  ``TEMPLATE_ATTN``'s layers once per cache.
- each device folder's ``attention_kernels.py`` (its ``DEVICE.attention``,
  loaded on first use): the CPU reference backend's run vLLM's CPU attention
  kernels (``torch.ops._C``), which pick an instruction-set-specific interior
  layout (keys transposed or AMX-packed inside a block), so a cache written by
  them must only be read by them; a device folder with its own kernels runs
  them on the plain layout; a first-light folder's run the reference.

Never mix paths on one cache: ``attention/paths.py`` chooses one path per engine.
"""
