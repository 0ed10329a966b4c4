"""The GPU backend: a plain vLLM ``Platform`` for one torch device, named in ``identity.py``.

The device is named in one table, ``identity.py`` (device type, torch module,
dispatch key, distributed backend, graph API, kernel compiler, ...); every
other file reads it or takes what it needs from files that do. Each file
serves vLLM hooks in one of two tiers, named once in ``availability.HOOKS`` (each
hook with its files and its section of docs/porting-guide.md, which walks them in
that order, each with the test that turns green): *first light*, what a device
needs to generate its first token through vLLM, eagerly, with the reference
(plain torch) kernels; *speed*, the device's own kernels and everything built on
them. A speed hook whose runtime API the identity table leaves out (``None``)
runs its first-light part instead.

``device.py`` is the device object the layers below the platform read (no vLLM
import, no kernel compiler import). Every file's docstring names the vLLM hook it serves
and the test that proves it (``tests/shared/test_device_identity.py`` checks). This
``__init__`` is the folder's entry in the device registry (``device_registry.DEVICE_PACKAGES``):
the device type its identity table names, and its platform class; the standard library
and the table only.
"""

from vllm_platform_template.devices.gpu.identity import IDENTITY

DEVICE_TYPE = IDENTITY.device_type  # the VLLM_TEMPLATE_DEVICE value
PLATFORM_CLASS = "TemplateGpuPlatform"  # in platform.py
