"""Device-neutral kernel code of the template. No module here imports vLLM.

- ``reference``: the semantics in plain torch (readable, the spec of each op).
- ``paged_attention``: the plain-torch paged attention every device's
  attention kernels are tested against, and the KV-write slot contract.

Each device's own kernels live in its folder (``devices/<name>/``).
"""
