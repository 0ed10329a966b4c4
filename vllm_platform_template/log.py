"""Loggers of the plugin, routed through vLLM's logging configuration.

vLLM configures handlers and format on its ``vllm`` logger; naming ours
``vllm.template.<module>`` makes them children of it, so plugin messages carry
vLLM's format, level (``VLLM_LOGGING_LEVEL``) and process name.
"""

from __future__ import annotations

from vllm.logger import init_logger


def get_logger(module_name: str):  # -> vllm.logger._VllmLogger
    """A vLLM logger for ``module_name`` (pass ``__name__``)."""
    short = module_name.removeprefix("vllm_platform_template.")
    return init_logger(f"vllm.template.{short}")
