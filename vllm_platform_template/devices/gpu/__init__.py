"""The GPU backend: a plain vLLM ``Platform`` for one torch device, the shape a port copies.

The device is named in one table, ``identity.py`` (device type, torch module,
dispatch key, distributed backend, graph API, kernel compiler, ...); every
other file reads it. Each file serves vLLM hooks, in the order a port meets
them (docs/porting-guide.md walks them, each with the test that turns green):

====================================================  ===============================
vLLM hook                                             file
====================================================  ===============================
platform identity                                     ``identity.py``
activation (``vllm.platform_plugins``)                ``availability.py``
device queries, memory, ``set_device``, seeding       ``platform.py``
worker, memory pool and sleep mode                    ``worker.py``
communicator                                          ``communicator.py``
model runner choice and sampler                       ``worker.py``
pinned / UVA buffers                                  ``views.py``
IR / CustomOp kernel table, ``import_kernels``        ``device.py``, ``kernels/``
attention kernels                                     ``attention_kernels.py``
compiler backend and passes                           ``platform.py``, ``device.py``
graph capture backend                                 ``graphs.py``
====================================================  ===============================

``device.py`` is the device object the layers below the platform read (no vLLM
import, no Triton import). Every file's docstring names the vLLM hook it serves
and the test that proves it (``tests/unit/test_device_identity.py`` checks).
"""
