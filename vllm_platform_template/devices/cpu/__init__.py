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

``device.py`` is the device object (no vLLM import). This ``__init__`` is the
folder's entry in the device registry (``device_registry.DEVICE_PACKAGES``): standard
library only.
"""

DEVICE_TYPE = "cpu"  # its tensors' torch device type: the VLLM_TEMPLATE_DEVICE value
PLATFORM_CLASS = "TemplateCpuPlatform"  # in platform.py

# The Ray resource the CPU platform's workers reserve, one unit per worker
# (``Platform.ray_device_key``): a CPU is no Ray accelerator, and Ray reserves "CPU"
# for its own scheduling, so every Ray node that may run CPU workers declares this
# custom resource (``ray start --resources '{"template_cpu": N}'``; docs/ray.md).
CPU_RAY_RESOURCE = "template_cpu"
