"""The template's attention backend, ``TEMPLATE_ATTN``.

- ``registration``: enum registration and the body of ``get_attn_backend_cls``.
- ``backend``: the ``AttentionBackend`` class (capabilities, parts).
- ``metadata``: per-step metadata and its builder.
- ``impl``: KV write and attention, run by the resolved kernels.
- ``kernel_choice``: which kernels run (``additional_config["template"]["attention"]``).

Kernels: each device's ``attention_kernels`` (``devices/<name>/``) and the
plain-torch reference (``reference_kernels/paged_attention``). Importing this package
imports neither vLLM nor torch.
"""
