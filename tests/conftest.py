"""Shared test configuration.

Tiers: ``tests/unit`` (fast, no engine), ``tests/e2e`` (marked ``e2e``; each
engine start costs tens of seconds on a 2-core machine, so e2e tests share
engine runs through the session-scoped fixtures in ``tests/e2e/conftest.py``),
and the GPU tier (marked ``gpu``: ``tests/gpu`` and the ``test_gpu_*`` e2e
files, skipped without the device). The fused Llama's kernel tests sit beside
it (``vllm_platform_template/models/llama/tests``). This directory is on
``sys.path`` (pytest's prepend import mode), so the test helpers here
(``hf_reference``, ``logprob_closeness``, ``engine_exit``) import by name.
"""

from __future__ import annotations

import os

import pytest

from vllm_platform_template.platform_plugin.activation import DEVICE_ENV


@pytest.fixture(autouse=True)
def _no_template_device_leak(monkeypatch: pytest.MonkeyPatch) -> None:
    """Tests start with the plugin inactive unless they set the device themselves."""
    if DEVICE_ENV in os.environ:
        monkeypatch.delenv(DEVICE_ENV)
