"""The XPU backend (reserved; unverified on hardware): vLLM's XPU platform with IPEX kernels.

The folder: ``kernels.py`` (Intel Extension for PyTorch, optional; its IR
provider ``template_ipex`` is also tested on CPU tensors in ``tox -e ipex``),
``platform.py``, ``worker.py``, ``availability.py``. No XPU was available to
this project: the config policy is unit-tested on CPU; nothing here has run on
an XPU, and it has no attention kernels or graph backend of its own yet.

``device.py`` is the device object (no vLLM import). This ``__init__`` is the
folder's entry in the device registry (``device_registry.DEVICE_PACKAGES``): standard
library only.
"""

DEVICE_TYPE = "xpu"  # its tensors' torch device type: the VLLM_TEMPLATE_DEVICE value
PLATFORM_CLASS = "TemplateXpuPlatform"  # in platform.py
