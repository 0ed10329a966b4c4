"""The conformance kit run against this plugin's own providers."""

from vllm_platform_template_tools.conformance.suite import *  # noqa: F403
