"""The template's attention backend, ``TEMPLATE_ATTN``.

- ``registration``: enum registration and the body of ``get_attn_backend_cls``.
- ``backend``: the ``AttentionBackend`` class (capabilities, parts).
- ``metadata``: per-step metadata and its builder.
- ``impl``: KV write and attention, dispatched to a kernel path.
- ``paths``: which kernel path runs (``additional_config["template"]["attention"]``).

Kernels live in ``vllm_platform_template.kernels.paged_attention`` (reference,
vLLM CPU kernels) and ``kernels.triton.paged_attention`` (CUDA). Importing this
package imports neither vLLM nor torch.
"""
