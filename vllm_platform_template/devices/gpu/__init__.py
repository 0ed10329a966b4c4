"""The GPU reference backend: the shape a vendor copies for a new accelerator.

A plain vLLM ``Platform`` (not vLLM's ``CudaPlatform``) on pure-Python vLLM,
whose every kernel is the plugin's own (Triton). The folder:

- ``kernels/`` (Triton: layernorm, activation, rotary, paged attention; no vLLM)
  and ``kernels/supports.py`` (which calls they take);
- ``attention_kernels.py`` (the Triton kernels behind ``TEMPLATE_ATTN``);
- ``graphs.py`` (CUDA graphs in vLLM's graph pool) and ``cuda_views.py``
  (the tensor views vLLM makes with compiled ops, made with torch);
- ``platform.py``, ``worker.py``, ``communicator.py`` (NCCL through
  torch.distributed), ``availability.py``.

``device.py`` is the device object (no vLLM import, no Triton import).
"""
