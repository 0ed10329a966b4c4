"""The vLLM platform classes of the template and the policy that configures them.

- ``activation``: entry points and the ``VLLM_TEMPLATE_DEVICE`` setting.
- ``mixin``: what every template platform adds to vLLM's platform.
- ``cpu`` / ``cuda`` / ``xpu``: one concrete platform per reference backend.
- ``policy``: ``check_and_update_config`` as small pure functions.
- ``worker`` / ``model_runner``: the CPU worker and model runner subclasses.
- ``patches``: the registry of the few vLLM patches that have no hook.
"""
