"""The GPU folder's platform: its shape and answers, checked on any machine (no device).

What it does on the device is the GPU tier's job (``-m gpu``); here: it is a
plain ``Platform`` (no ``CudaPlatform``, so no compiled vLLM file), out of
tree, whose identity is the identity table's, with its own worker (no memory
pool of vLLM's sleep mode), communicator and block-size default; and its first
light: a table without the speed tier's APIs runs eagerly on vLLM's V1 model
runner with the runner's slot mapping in torch, refusing what it cannot run,
and a device module without a capability version or compute-unit count gets vLLM's answers.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import os
from types import SimpleNamespace

import pytest
import torch
from vllm.platforms.interface import Platform, PlatformEnum

from vllm_platform_template.devices.gpu import platform as folder
from vllm_platform_template.devices.gpu.identity import IDENTITY
from vllm_platform_template.devices.gpu.worker import TemplateGpuWorker
from vllm_platform_template.platform_hooks.entry_point import PLATFORM_QUALNAMES

DEVICE = IDENTITY.device_type


def test_gpu_platform_is_a_plain_out_of_tree_platform() -> None:
    cls = folder.TemplateGpuPlatform
    assert PLATFORM_QUALNAMES[DEVICE] == f"{cls.__module__}.{cls.__qualname__}"
    assert issubclass(cls, Platform)
    assert [c.__name__ for c in cls.__mro__ if c.__module__.startswith("vllm.platforms")] == [
        "Platform"
    ]
    assert cls._enum == PlatformEnum.OOT


def test_gpu_platform_identity_is_the_identity_table() -> None:
    cls = folder.TemplateGpuPlatform
    assert (cls.device_type, cls.device_name) == (DEVICE, DEVICE)
    assert cls.dispatch_key == IDENTITY.dispatch_key
    assert cls.dist_backend == (IDENTITY.dist_backend or "")
    assert cls.device_control_env_var == IDENTITY.visible_devices_env
    assert cls.ray_device_key == IDENTITY.ray_device_key
    assert cls.template_device.torch_device_type == DEVICE


def test_gpu_worker_has_no_sleep_mode_memory_pool() -> None:
    """vLLM would reach for its CUDA-only sleep-mode allocator on an OOT platform."""
    assert not folder.TemplateGpuPlatform().is_sleep_mode_available()
    pool = TemplateGpuWorker._maybe_get_memory_pool_context(None, "weights")  # type: ignore[arg-type]
    with pool:
        pass
    assert type(pool).__name__ == "nullcontext"


def test_gpu_platform_names_its_own_worker() -> None:
    config = SimpleNamespace(parallel_config=SimpleNamespace(worker_cls="auto"))
    folder.TemplateGpuPlatform._update_worker(config)  # type: ignore[arg-type]
    assert config.parallel_config.worker_cls == folder.TEMPLATE_WORKER


@pytest.mark.parametrize(("given", "expected"), [(None, folder.DEFAULT_BLOCK_SIZE), (32, 32)])
def test_gpu_platform_block_size_default(given: int | None, expected: int) -> None:
    config = SimpleNamespace(cache_config=SimpleNamespace(block_size=given))
    folder.TemplateGpuPlatform._update_device_config(config)  # type: ignore[arg-type]
    assert config.cache_config.block_size == expected


# --- first light: a device whose identity leaves the speed tier's APIs out ------------
FIRST_LIGHT = dataclasses.replace(IDENTITY, kernel_compiler=None, graph_api=None)
SPEED = dataclasses.replace(IDENTITY, kernel_compiler="triton", graph_api="Graph")


@pytest.fixture(autouse=True)
def graph_api_as_the_table_names_it(monkeypatch) -> None:
    """The policy for a given identity, whatever this machine's device offers: the graph
    API is the table's (``availability.graph_api`` asks the device; its own tests check
    that, and the test below what the platform does when the device lacks it)."""
    monkeypatch.setattr(folder, "graph_api", lambda identity=IDENTITY: identity.graph_api)


def test_a_named_graph_api_the_device_lacks_runs_eagerly_with_a_warning(
    monkeypatch, caplog
) -> None:
    monkeypatch.setattr(folder, "graph_api", lambda identity=IDENTITY: None)
    monkeypatch.setattr(folder, "graph_api_problem", lambda identity=IDENTITY: "it has none")
    config, environ = _config(graphs="FULL_DECODE_ONLY"), {}
    folder.first_light_defaults(
        config, dataclasses.replace(FIRST_LIGHT, graph_api="Graph"), environ
    )  # type: ignore[arg-type]
    assert (
        config.model_config.enforce_eager
        and config.compilation_config.cudagraph_mode.name == "NONE"
    )
    warned = [r for r in caplog.records if r.levelname == "WARNING" and "it has none" in r.message]
    assert len(warned) == 1 and "'13. Graph capture'" in warned[0].message


def _config(mode=None, graphs=None) -> SimpleNamespace:
    return SimpleNamespace(
        compilation_config=SimpleNamespace(mode=mode, cudagraph_mode=graphs),
        model_config=SimpleNamespace(enforce_eager=False),
        kernel_config=SimpleNamespace(enable_jit_warmup=True),
        scheduler_config=SimpleNamespace(async_scheduling=True),
        speculative_config=None,
    )


def test_first_light_runs_eager_on_the_v1_model_runner_synchronously() -> None:
    from vllm.config import CompilationMode, CUDAGraphMode

    config, environ = _config(), {}
    folder.first_light_defaults(config, FIRST_LIGHT, environ)  # type: ignore[arg-type]
    assert config.model_config.enforce_eager
    assert config.compilation_config.mode == CompilationMode.NONE
    assert config.compilation_config.cudagraph_mode == CUDAGraphMode.NONE
    assert not config.kernel_config.enable_jit_warmup
    assert not config.scheduler_config.async_scheduling
    assert environ == {folder.V2_MODEL_RUNNER_ENV: "0"}


@pytest.mark.parametrize(
    ("mode", "graphs", "environ", "named"),
    [
        ("VLLM_COMPILE", None, {}, "compilation was asked for"),
        (None, "PIECEWISE", {}, "graph capture was asked for"),
        (None, None, {"VLLM_USE_V2_MODEL_RUNNER": "1"}, "VLLM_USE_V2_MODEL_RUNNER=1 was asked"),
    ],
)
def test_first_light_refuses_what_it_cannot_run_with_what_runs(mode, graphs, environ, named):
    from vllm.config import CompilationMode, CUDAGraphMode

    config = _config(
        CompilationMode[mode] if mode else None, CUDAGraphMode[graphs] if graphs else None
    )
    with pytest.raises(ValueError, match=named) as refused:
        folder.first_light_defaults(config, FIRST_LIGHT, environ)  # type: ignore[arg-type]
    assert "first light" in str(refused.value) and "'13. Graph capture'" in str(refused.value)


def test_first_light_refuses_speculation_as_vllm_s_runner_needs_cuda_streams() -> None:
    """vLLM's V1 runner creates a torch.cuda.Stream for draft tokens when it starts:
    refused at config time, not a crash at engine start."""
    config = _config()
    config.speculative_config = SimpleNamespace(method="ngram")
    with pytest.raises(ValueError, match=r"speculative decoding \(") as refused:
        folder.first_light_defaults(config, FIRST_LIGHT, {})  # type: ignore[arg-type]
    assert "torch.cuda streams" in str(refused.value) and "first light" in str(refused.value)


FUSION_ONLY = {"template": {"compile_stage": "fusion_only"}}


@pytest.mark.parametrize("graph_api", [None, "accelerator"])
def test_the_fusion_only_stage_compiles_without_a_kernel_compiler(graph_api) -> None:
    """fusion_only generates no code (passes and IR lowering, FX graphs run as they are):
    asked for, it stays on where the graph stage is refused; graphs as the graph API says."""
    from vllm.config import CompilationMode, CUDAGraphMode

    identity = dataclasses.replace(FIRST_LIGHT, graph_api=graph_api)
    config = _config(CompilationMode.VLLM_COMPILE, CUDAGraphMode.FULL_DECODE_ONLY)
    if graph_api is None:
        config.compilation_config.cudagraph_mode = None
    config.additional_config = FUSION_ONLY
    folder.first_light_defaults(config, identity, {})  # type: ignore[arg-type]
    assert config.compilation_config.mode == CompilationMode.VLLM_COMPILE
    assert not config.model_config.enforce_eager  # (vLLM's enforce_eager compiles nothing)
    expected_graphs = CUDAGraphMode.NONE if graph_api is None else CUDAGraphMode.FULL_DECODE_ONLY
    assert config.compilation_config.cudagraph_mode == expected_graphs
    assert not config.scheduler_config.async_scheduling


def test_the_fusion_only_stage_is_not_asked_for_by_choosing_it_alone() -> None:
    """The stage named without compilation asked for: first light stays uncompiled."""
    from vllm.config import CompilationMode

    config = _config()
    config.additional_config = FUSION_ONLY
    folder.first_light_defaults(config, FIRST_LIGHT, {})  # type: ignore[arg-type]
    assert config.compilation_config.mode == CompilationMode.NONE
    assert config.model_config.enforce_eager


def test_a_graph_api_missing_alone_turns_graphs_off_only() -> None:
    from vllm.config import CompilationMode, CUDAGraphMode

    identity = dataclasses.replace(SPEED, graph_api=None)
    config, environ = _config(CompilationMode.VLLM_COMPILE), {}
    folder.first_light_defaults(config, identity, environ)  # type: ignore[arg-type]
    assert config.compilation_config.mode == CompilationMode.VLLM_COMPILE
    assert config.compilation_config.cudagraph_mode == CUDAGraphMode.NONE
    assert config.scheduler_config.async_scheduling and environ == {}


def test_the_identitys_speed_apis_leave_the_config_alone() -> None:
    config, environ = _config(), {}
    folder.first_light_defaults(config, SPEED, environ)  # type: ignore[arg-type]
    assert config == _config() and environ == {}


def test_first_light_gives_vllms_model_runner_its_slot_mapping_in_torch(monkeypatch) -> None:
    import vllm.triton_utils.dispatcher as dispatcher

    from vllm_platform_template.reference_kernels.model_runner import OVERRIDES

    registered: list[dict] = []
    monkeypatch.setattr(dispatcher, "register_kernels", registered.append)
    monkeypatch.setattr(folder, "IDENTITY", FIRST_LIGHT)
    folder.TemplateGpuPlatform.register_triton_kernel_overrides()
    assert registered == [OVERRIDES]
    monkeypatch.setattr(folder, "IDENTITY", dataclasses.replace(IDENTITY, kernel_compiler="triton"))
    folder.TemplateGpuPlatform.register_triton_kernel_overrides()
    assert registered == [OVERRIDES]  # a device with a kernel compiler runs vLLM's own


def test_a_device_module_without_cudas_properties_gets_vllms_answers(monkeypatch) -> None:
    module = SimpleNamespace(get_device_properties=lambda i: SimpleNamespace(total_memory=1 << 30))
    monkeypatch.setattr(folder, "torch_module", lambda: module)
    assert folder.TemplateGpuPlatform.get_device_capability() is None
    with pytest.raises(NotImplementedError):
        folder.TemplateGpuPlatform.get_device_uuid()
    with pytest.raises(NotImplementedError):
        folder.TemplateGpuPlatform.num_compute_units()


def test_dtypes_come_from_the_devices_runtime(monkeypatch) -> None:
    """``torch.accelerator.get_device_capability``'s dtypes decide; no vendor's version rule."""
    module = SimpleNamespace(get_device_name=lambda i=0: "a device without bfloat16")
    monkeypatch.setattr(folder, "torch_module", lambda: module)
    capability = {"supported_dtypes": {torch.float32, torch.float16}}
    monkeypatch.setattr(torch.accelerator, "get_device_capability", lambda *a: capability)
    folder.TemplateGpuPlatform.check_if_supports_dtype(torch.float16)
    with pytest.raises(ValueError, match=r"does not support torch\.bfloat16.*Run with another"):
        folder.TemplateGpuPlatform.check_if_supports_dtype(torch.bfloat16)
    monkeypatch.delattr(torch.accelerator, "get_device_capability")  # a torch that cannot say
    folder.TemplateGpuPlatform.check_if_supports_dtype(torch.bfloat16)


def test_a_guard_that_cannot_say_leaves_bf16_to_the_device_module(monkeypatch) -> None:
    """torch 2.11's in-tree device guards raise for the capability query: no refusal from
    it; the device module's ``is_bf16_supported`` decides where it has one."""

    def cannot_say(*args: object) -> dict:
        raise RuntimeError("Backend doesn't support getting device capabilities.")

    monkeypatch.setattr(torch.accelerator, "get_device_capability", cannot_say)
    module = SimpleNamespace(get_device_name=lambda i=0: "dev", is_bf16_supported=lambda: True)
    monkeypatch.setattr(folder, "torch_module", lambda: module)
    folder.TemplateGpuPlatform.check_if_supports_dtype(torch.bfloat16)
    module.is_bf16_supported = lambda: False
    with pytest.raises(ValueError, match=r"does not support torch\.bfloat16"):
        folder.TemplateGpuPlatform.check_if_supports_dtype(torch.bfloat16)
    folder.TemplateGpuPlatform.check_if_supports_dtype(torch.float16)


def test_memory_queries_fall_back_to_the_device_module(monkeypatch) -> None:
    """A torch whose ``torch.accelerator`` lacks a memory call: the device module answers."""
    module = SimpleNamespace(mem_get_info=lambda i: (5, 8), max_memory_allocated=lambda d: 3)
    monkeypatch.setattr(folder, "torch_module", lambda: module)
    monkeypatch.delattr(torch.accelerator, "get_memory_info")
    monkeypatch.delattr(torch.accelerator, "max_memory_allocated")
    assert folder.TemplateGpuPlatform.get_device_total_memory() == 8
    assert folder.accelerator_call("max_memory_allocated", None) == 3


def test_first_light_uses_vllms_communicator(monkeypatch) -> None:
    monkeypatch.setattr(folder, "IDENTITY", FIRST_LIGHT)
    assert folder.TemplateGpuPlatform.get_device_communicator_cls().endswith(
        "base_device_communicator.DeviceCommunicatorBase"
    )
    monkeypatch.setattr(folder, "IDENTITY", SPEED)  # a graph class: its capture communicator
    if importlib.util.find_spec(folder.COMMUNICATOR.rsplit(".", 1)[0]) is None:
        with pytest.raises(RuntimeError, match=r"communicator\.py"):  # a first-light folder
            folder.TemplateGpuPlatform.get_device_communicator_cls()
    else:
        assert folder.TemplateGpuPlatform.get_device_communicator_cls() == folder.COMMUNICATOR


def test_a_graph_class_without_the_folders_communicator_is_refused_with_what_to_write(
    monkeypatch,
) -> None:
    monkeypatch.setattr(folder, "IDENTITY", SPEED)
    monkeypatch.setattr(folder, "COMMUNICATOR", f"{folder.__package__}.not_written.Communicator")
    with pytest.raises(RuntimeError, match=r"communicator.py .*'5. Communicator'.*write it"):
        folder.TemplateGpuPlatform.get_device_communicator_cls()


def test_every_template_platform_spawns_its_engine_processes(monkeypatch) -> None:
    """A forked engine of a parent that ran torch on the CPU deadlocks in libgomp: spawn,
    unless the user chose a method (kept, with a warning)."""
    from vllm_platform_template.devices.gpu.platform import TemplateGpuPlatform
    from vllm_platform_template.platform_hooks.mixin import START_METHOD_ENV

    monkeypatch.delenv(START_METHOD_ENV, raising=False)
    TemplateGpuPlatform._choose_start_method()
    assert os.environ[START_METHOD_ENV] == "spawn"
    monkeypatch.setenv(START_METHOD_ENV, "fork")
    TemplateGpuPlatform._choose_start_method()
    assert os.environ[START_METHOD_ENV] == "fork"
