"""The CPU reference backend: vLLM's CPU platform as an out-of-tree device.

The host CPU plays the accelerator, so every integration path of the template
runs in public CI. The folder:

- ``kernels.py`` (vLLM's C++ CPU kernels when loaded, else torch) and
  ``vllm_cpu_build.py`` (loads the vLLM CPU build the CPU can run);
- ``attention_kernels.py`` (vLLM's CPU paged-attention kernels for ``TEMPLATE_ATTN``);
- ``graphs.py`` (the static-graph contract, emulated) and ``graph_capture.py``;
- ``platform.py``, ``worker.py``, ``fast_paths.py`` (vLLM's CPU fast paths an
  out-of-tree platform loses), ``policy.py`` (the CPU's config decisions as
  pure functions), ``availability.py``.

``device.py`` is the device object (no vLLM import).
"""
