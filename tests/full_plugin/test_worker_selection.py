"""``TemplatePlatformMixin._update_worker``: vLLM's worker choice becomes the template's."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from vllm_platform_template.devices.cpu.platform import (
    STOCK_CPU_WORKER,
    TEMPLATE_CPU_WORKER,
    TemplateCpuPlatform,
)


def _config(worker_cls: str) -> SimpleNamespace:
    return SimpleNamespace(parallel_config=SimpleNamespace(worker_cls=worker_cls))


@pytest.mark.parametrize("requested", ["auto", STOCK_CPU_WORKER])
def test_vllms_choice_becomes_the_template_worker(requested: str) -> None:
    config = _config(requested)
    TemplateCpuPlatform._update_worker(config)  # type: ignore[arg-type]
    assert config.parallel_config.worker_cls == TEMPLATE_CPU_WORKER


def test_a_users_worker_is_kept() -> None:
    config = _config("my_plugin.worker.MyWorker")
    TemplateCpuPlatform._update_worker(config)  # type: ignore[arg-type]
    assert config.parallel_config.worker_cls == "my_plugin.worker.MyWorker"
