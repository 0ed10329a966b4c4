"""What keeps the template platform's log quiet and its settings right (issue: the demo's log).

The plugin's own variables are known to vLLM's environment check; the CPU
platform quiets only vLLM messages it lists (each still written by the
installed vLLM, matched exactly), ignores the one deprecation warning vLLM's
kernel-override scan provokes, chooses the model runner its worker drives,
and gets vLLM's own CPU batch defaults. The demo's whole log is held to a list
of allowed warnings in ``tests/full_plugin/test_demo_log.py``.
"""

from __future__ import annotations

import ast
import importlib.util
import json
import logging
import os
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from vllm_platform_template.settings import DEVICE_ENV, ENVIRONMENT_VARIABLES


def _run(code: str, env: dict[str, str]) -> subprocess.CompletedProcess:
    base = {k: v for k, v in os.environ.items() if k != DEVICE_ENV}
    return subprocess.run(
        [sys.executable, "-c", code],
        env={**base, **env},
        capture_output=True,
        text=True,
        timeout=300,
    )


# --- the plugin's variables ---------------------------------------------------------


@pytest.fixture
def clean_vllm_environ(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    for name in list(os.environ):
        if name.startswith("VLLM_"):
            monkeypatch.delenv(name)
    return monkeypatch


def test_the_plugins_variables_are_known_to_vllms_check(clean_vllm_environ) -> None:
    from vllm_platform_template.devices.cpu.platform import TemplateCpuPlatform

    cpu_folders = TemplateCpuPlatform.template_device.environment_variables
    for name in (*ENVIRONMENT_VARIABLES, *cpu_folders):
        clean_vllm_environ.setenv(name, "x")
    clean_vllm_environ.setenv("VLLM_CACHE_ROOT", "/tmp")  # one of vLLM's own
    TemplateCpuPlatform.validate_environ(hard_fail=True)  # raises on any unknown one
    assert "VLLM_TEMPLATE_CPU_ISA" in cpu_folders


@pytest.mark.parametrize(
    ("name", "hint"),
    [
        ("VLLM_TEMPLATE_DEVISE", "vllm-platform-template reads VLLM_TEMPLATE_DEVICE"),
        ("VLLM_NOPE", ""),
    ],
)
def test_other_vllm_variables_are_still_flagged(clean_vllm_environ, name: str, hint: str) -> None:
    from vllm_platform_template.devices.cpu.platform import TemplateCpuPlatform
    from vllm_platform_template.platform_hooks import mixin

    clean_vllm_environ.setenv(name, "cpu")
    with pytest.raises(ValueError, match=f"Unknown vLLM environment variable detected: {name}"):
        TemplateCpuPlatform.validate_environ(hard_fail=True)
    warned: list[str] = []
    clean_vllm_environ.setattr(
        mixin.logger, "warning", lambda msg, *args: warned.append(msg % args)
    )
    TemplateCpuPlatform.validate_environ(hard_fail=False)
    expected = f"Unknown vLLM environment variable detected: {name}"
    assert len(warned) == 1 and warned[0].startswith(expected), warned
    assert hint in warned[0]
    if not hint:
        assert warned == [expected]


# --- vLLM messages the CPU platform quiets ----------------------------------------------


def _string_constants(module_name: str) -> set[str]:
    spec = importlib.util.find_spec(module_name)
    assert spec is not None and spec.origin is not None, module_name
    tree = ast.parse(Path(spec.origin).read_text())
    return {
        n.value for n in ast.walk(tree) if isinstance(n, ast.Constant) and isinstance(n.value, str)
    }


def test_every_quieted_message_is_still_vllms() -> None:
    from vllm_platform_template.devices.cpu.platform import QUIETED_VLLM_MESSAGES

    for quieted in QUIETED_VLLM_MESSAGES:
        assert quieted.why
        assert quieted.message in _string_constants(quieted.logger), quieted


def _record(logger: str, msg: str, *args: object) -> logging.LogRecord:
    return logging.LogRecord(logger, logging.WARNING, __file__, 1, msg, args, None)


def test_only_the_listed_messages_are_dropped() -> None:
    from vllm_platform_template.devices.cpu.platform import QUIETED_VLLM_MESSAGES
    from vllm_platform_template.log import quiet_vllm_messages

    quiet_vllm_messages(QUIETED_VLLM_MESSAGES)
    quiet_vllm_messages(QUIETED_VLLM_MESSAGES)  # idempotent: one filter per logger
    cpu = logging.getLogger("vllm.platforms.cpu")
    assert len(cpu.filters) == len({id(f) for f in cpu.filters}) == 1
    for quieted in QUIETED_VLLM_MESSAGES:
        args = quieted.args or ()
        assert not logging.getLogger(quieted.logger).filter(
            _record(quieted.logger, quieted.message, *args)
        )
    ssm = next(q for q in QUIETED_VLLM_MESSAGES if q.args)
    # The same message for a model that has SSM state still shows.
    assert cpu.filter(_record(ssm.logger, ssm.message, "gdn"))
    assert cpu.filter(_record("vllm.platforms.cpu", "another warning"))


def test_the_model_runner_choice_keeps_the_users(monkeypatch: pytest.MonkeyPatch) -> None:
    from vllm_platform_template.devices.cpu.platform import (
        USE_V2_MODEL_RUNNER_ENV,
        TemplateCpuPlatform,
    )

    config = SimpleNamespace(
        compilation_config=SimpleNamespace(inductor_compile_config={}),
        parallel_config=SimpleNamespace(use_ray=False),
    )
    monkeypatch.delenv(USE_V2_MODEL_RUNNER_ENV, raising=False)
    TemplateCpuPlatform._update_device_config(config)  # type: ignore[arg-type]
    assert os.environ[USE_V2_MODEL_RUNNER_ENV] == "0"
    monkeypatch.setenv(USE_V2_MODEL_RUNNER_ENV, "1")
    TemplateCpuPlatform._update_device_config(config)  # type: ignore[arg-type]
    assert os.environ[USE_V2_MODEL_RUNNER_ENV] == "1"


KERNEL_OVERRIDES = """
import json, warnings
import torch.distributed
from vllm.platforms import current_platform
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    {call}
print(json.dumps([str(w.message) for w in caught]))
"""


def test_the_kernel_override_scan_provokes_no_deprecation_warning() -> None:
    template = _run(
        KERNEL_OVERRIDES.format(call="current_platform.register_triton_kernel_overrides()"),
        {DEVICE_ENV: "cpu"},
    )
    assert template.returncode == 0, template.stderr[-3000:]
    assert not [w for w in json.loads(template.stdout.splitlines()[-1]) if "reduce_op" in w]
    # vLLM's own CPU platform does provoke it (what the override is there for).
    stock = _run(
        KERNEL_OVERRIDES.format(
            call="from vllm.platforms.cpu import CpuPlatform; "
            "CpuPlatform.register_triton_kernel_overrides()"
        ),
        {},
    )
    assert stock.returncode == 0, stock.stderr[-3000:]
    assert [w for w in json.loads(stock.stdout.splitlines()[-1]) if "reduce_op" in w]


# --- batch defaults -------------------------------------------------------------------

BATCH_DEFAULTS = """
import json
from vllm.plugins import load_general_plugins
load_general_plugins()
from vllm.engine.arg_utils import EngineArgs
out = {}
for world_size in (1, 2):
    tokens, seqs = EngineArgs.get_batch_defaults(world_size)
    out[world_size] = [{c.name: v for c, v in d.items()} for d in (tokens, seqs)]
print(json.dumps(out))
"""


def test_the_template_cpu_platform_gets_stock_vllms_cpu_batch_defaults() -> None:
    template = _run(BATCH_DEFAULTS, {DEVICE_ENV: "cpu"})
    assert template.returncode == 0, template.stderr[-3000:]
    stock = _run(BATCH_DEFAULTS, {})  # plugin inactive: vLLM's CpuPlatform, is_cpu()
    assert stock.returncode == 0, stock.stderr[-3000:]
    ours = json.loads(template.stdout.splitlines()[-1])
    assert ours == json.loads(stock.stdout.splitlines()[-1])
    assert ours["1"] == [
        {"LLM_CLASS": 4096, "OPENAI_API_SERVER": 2048},
        {"LLM_CLASS": 256, "OPENAI_API_SERVER": 128},
    ]
