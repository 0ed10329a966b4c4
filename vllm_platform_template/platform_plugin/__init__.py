"""The vLLM platform classes of the template and the policy that configures them.

- ``activation``: entry points and the ``VLLM_TEMPLATE_DEVICE`` setting.
- ``mixin``: what every template platform adds to vLLM's platform.
- ``cpu`` / ``cuda`` / ``xpu``: one concrete platform per reference backend.
- ``policy``: ``check_and_update_config`` as small pure functions.
- ``worker`` / ``xpu_worker`` / ``gpu_worker``: the worker subclass per backend;
  ``cpu_fast_paths``: the CPU thread binding vLLM gates on ``is_cpu()``.
- ``patches``: the registry of every rebinding of a vLLM or torch object.
"""
