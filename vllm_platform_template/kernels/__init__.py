"""Device kernels of the template. No module here imports vLLM.

- ``reference``: the semantics in plain torch (readable, the spec of each op).
- ``cpu``: the CPU reference backend's kernels (vLLM's CPU build kernels when
  loaded into ``torch.ops._C``, else vectorised torch).
- ``triton``: Triton kernels for GPUs.
- ``ipex``: Intel Extension for PyTorch kernels (optional).
- ``ops``: the plugin's own torch custom ops (``torch.ops.template.*``), which
  the fusion passes insert into graphs and which dispatch per device.
"""
