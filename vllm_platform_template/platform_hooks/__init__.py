"""What every template platform shares; the platforms themselves live in ``devices/<name>/``.

- ``entry_point``: entry points and the ``VLLM_TEMPLATE_DEVICE`` setting (each
  device's ``availability`` is read by name).
- ``registration``: per-process registrations (general plugin).
- ``mixin``: what every template platform adds to vLLM's platform.
- ``policy``: the decisions of ``apply_config_platform_defaults`` and
  ``check_and_update_config`` as small pure functions.
- ``worker_reports``: the report RPCs every template worker serves.
- ``compile_cache``: the trusted compile cache.
"""
