"""Shared test configuration.

Two tiers: ``tests/unit`` (fast, no engine) and ``tests/e2e`` (marked ``e2e``;
each engine start costs tens of seconds on a 2-core machine, so e2e tests share
engine runs through the session-scoped fixtures in ``tests/e2e/conftest.py``).
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
