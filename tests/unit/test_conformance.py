"""The conformance kit run against this plugin's own providers."""

from vllm_platform_template.conformance.suite import *  # noqa: F403
