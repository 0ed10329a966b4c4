"""The paged KV-cache contract of ``TEMPLATE_ATTN`` and its plain-torch reference.

No module here imports vLLM.

- ``contract``: the KV-cache layout and the argument and slot rules every path
  keeps, their checks and ``AttentionLayout`` (what is fixed per KV-cache group);
  the public kernel functions check every call, ``TEMPLATE_ATTN``'s layers once
  per cache.
- ``reference``: the semantics in plain torch (causal, grouped-query heads, mixed
  prefill/decode batches, fp32 math) on the plain interior. Runs on any device.
- each device folder's ``attention_kernels.py`` (its ``DEVICE.attention``,
  loaded on first use): the CPU reference backend's run vLLM's CPU attention
  kernels (``torch.ops._C``, their own interior); a device folder with its own
  kernels runs them on the plain interior; a first-light folder's run the
  reference.

Never mix paths on one cache: ``attention/kernel_choice.py`` chooses one path per engine.
"""
