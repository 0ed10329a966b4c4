"""Paged attention kernels of the template's attention backend (``TEMPLATE_ATTN``).

No module here imports vLLM. All paths share one paged KV-cache contract: the
per-layer cache vLLM allocates for ``KVCacheLayout.LBHNC`` is a tensor
``[num_blocks, num_kv_heads, block_size, 2 * head_size]``, split by
:func:`reference.split_kv_cache` into ``key_cache`` and ``value_cache`` views of
``[num_blocks, num_kv_heads, block_size, head_size]`` each. A token's slot is
``block_id * block_size + offset``; slot ``-1`` means "do not write" (padding).
Every path's KV write keeps vLLM's slot contract (``_validation.check_slot_mapping``):
``slot_mapping`` is contiguous int64 with one entry per token to write, at most
the number of key rows; rows past it are padding and are not written.

- ``reference``: the semantics in plain torch (causal, grouped-query heads, mixed
  prefill/decode batches, fp32 math). Reads and writes the *plain* interior
  layout (``key_cache[b, h, t]`` is token ``t``'s key). Runs on any device.
- ``cpu``: vLLM's CPU attention kernels (``torch.ops._C``). They pick an
  instruction-set-specific interior layout (keys transposed or AMX-packed inside
  a block), so a cache written by them must only be read by them.
- ``vllm_platform_template.devices.gpu.kernels.paged_attention``: the CUDA path
  (plain layout), imported lazily by the backend.

Never mix paths on one cache: the backend chooses one path per engine.
"""
