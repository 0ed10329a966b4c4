"""One folder per backend: everything the plugin knows about a device.

Each ``devices/<name>/`` folder's ``device.py`` exports ``DEVICE`` (a
:class:`~vllm_platform_template.device.TemplateDevice`) and holds, side by side:

- the kernels (no vLLM import) and the kernel table the IR providers, the
  CustomOps and the hand-written model call;
- the attention kernels of ``TEMPLATE_ATTN`` and the static-graph backend;
- ``platform.py`` (the vLLM ``Platform``), ``worker.py`` and, where the device
  has its own collectives, ``communicator.py``;
- ``availability.py``: whether this machine can run the device (read by the
  entry point before vLLM is imported, standard library first).

``device.py`` and what it imports stay below the platform layer (no vLLM), so the
rest of the plugin can ask it for kernels without importing a platform; the
platform modules import vLLM and the shared hooks in ``platform_hooks``.
``vllm-template new`` and docs/porting-guide.md start a new device from one of
these folders.

The device registry (``device_registry.py``) finds these folders by their
``__init__`` (``DEVICE_TYPE``, ``PLATFORM_CLASS``); this ``__init__`` holds nothing.
"""
