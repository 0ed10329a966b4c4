"""Device-neutral reference kernels. No module here imports vLLM.

- ``reference``: the semantics of every kernel-table op in plain torch (readable,
  the spec each device's kernels are tested against, and every device's fallback).
- ``paged_attention``: the paged KV-cache layout, the one KV-write contract
  (``contract.check_slot_mapping``) and the torch reference paged attention.

Each device's own kernels live in its folder (``devices/<name>/kernels*``).
"""
