"""Process environment for commands that start vLLM.

vLLM reads its settings from the environment when it is imported, and passes
the environment on to the engine and worker processes it spawns; so the
template's commands decide the platform here, before anything imports vLLM.
"""

from __future__ import annotations

import os

from vllm_platform_template.settings import DEVICE_ENV


class EnvironmentError_(RuntimeError):
    """The environment would silently run something other than what was asked."""


def select_device(device: str | None) -> None:
    """Make this process and its children use ``device`` (None: stock vLLM)."""
    if device is None:
        os.environ.pop(DEVICE_ENV, None)
        return
    if os.environ.get("VLLM_TARGET_DEVICE", "").lower() == "cpu":
        raise EnvironmentError_(
            "VLLM_TARGET_DEVICE=cpu makes vLLM skip every out-of-tree platform plugin, so the "
            "template platform would not run. Unset VLLM_TARGET_DEVICE (it is only needed to "
            "build vLLM from source)."
        )
    os.environ[DEVICE_ENV] = device


def logs_to_stderr() -> None:
    """Keep stdout for the command's own output (vLLM logs to stdout by default)."""
    os.environ.setdefault("VLLM_LOGGING_STREAM", "ext://sys.stderr")


def quiet_logs() -> None:
    """Only errors on stderr, from every process of the run (they inherit the environment).

    vLLM's log level (``VLLM_LOGGING_LEVEL``; vLLM reads it when it is imported)
    and torch's C++ warnings (``TORCH_CPP_LOG_LEVEL``; vLLM's CPU kernels report
    their NUMA memory binding through it). A level the user set is kept.
    """
    os.environ.setdefault("VLLM_LOGGING_LEVEL", "ERROR")
    os.environ.setdefault("TORCH_CPP_LOG_LEVEL", "ERROR")
