"""vLLM's Ray executor on the template CPU platform, without starting Ray.

The end-to-end run (TP=2 through Ray, tokens equal to the multiprocessing
executor's) is ``tests/full_plugin/test_ray.py``.
"""

from __future__ import annotations

import sys
from types import SimpleNamespace

import pytest

from vllm_platform_template import after_import
from vllm_platform_template.devices.cpu import CPU_RAY_RESOURCE
from vllm_platform_template.devices.cpu import policy as cpu_policy
from vllm_platform_template.devices.cpu.platform import TemplateCpuPlatform
from vllm_platform_template.platform_hooks import policy
from vllm_platform_template.settings import DEVICE_ENV


def test_the_cpu_platform_names_its_own_ray_resource() -> None:
    # vLLM's CpuPlatform has "" ("does not support ray"); Ray keeps "CPU" for itself.
    assert TemplateCpuPlatform.ray_device_key == CPU_RAY_RESOURCE
    assert CPU_RAY_RESOURCE not in ("", "CPU", "GPU")


def test_ray_workers_get_the_plugin_settings_and_the_users_win() -> None:
    environ = {
        DEVICE_ENV: "cpu",
        "VLLM_TEMPLATE_CPU_ISA": "avx2",
        "VLLM_PLUGINS": "template",
        "VLLM_CPU_OMP_THREADS_BIND": "0|1",  # vLLM's executor hands this one over itself
        "HOME": "/root",
    }
    env = policy.ray_worker_env_vars(environ, {"VLLM_TEMPLATE_CPU_ISA": "avx512"})
    assert env == {DEVICE_ENV: "cpu", "VLLM_TEMPLATE_CPU_ISA": "avx512", "VLLM_PLUGINS": "template"}


def _parallel(use_ray: bool, runtime_env: object = None) -> SimpleNamespace:
    return SimpleNamespace(
        parallel_config=SimpleNamespace(use_ray=use_ray, ray_runtime_env=runtime_env)
    )


def test_the_ray_runtime_env_carries_the_device(monkeypatch: pytest.MonkeyPatch) -> None:
    runtime_env = pytest.importorskip("ray.runtime_env", reason="Ray is not installed")
    monkeypatch.setenv(DEVICE_ENV, "cpu")
    requested = runtime_env.RuntimeEnv(env_vars={"MY_VAR": "1"})
    config = _parallel(True, requested)
    TemplateCpuPlatform._update_ray_runtime_env(config)  # type: ignore[arg-type]
    env_vars = config.parallel_config.ray_runtime_env["env_vars"]
    assert env_vars[DEVICE_ENV] == "cpu" and env_vars["MY_VAR"] == "1"
    assert requested["env_vars"] == {"MY_VAR": "1"}  # the user's object is not changed

    config = _parallel(False)
    TemplateCpuPlatform._update_ray_runtime_env(config)  # type: ignore[arg-type]
    assert config.parallel_config.ray_runtime_env is None


def test_the_legacy_ray_executor_is_refused_with_what_to_do() -> None:
    assert cpu_policy.ray_executor_problem(uses_ray=False, ray_v2_executor=False) is None
    assert cpu_policy.ray_executor_problem(uses_ray=True, ray_v2_executor=True) is None
    problem = cpu_policy.ray_executor_problem(uses_ray=True, ray_v2_executor=False)
    assert problem and "VLLM_USE_RAY_V2_EXECUTOR_BACKEND" in problem


def test_after_import_runs_once_the_module_is_imported(tmp_path, monkeypatch) -> None:
    name = "template_after_import_probe"
    (tmp_path / f"{name}.py").write_text("VALUE = 1\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, name, raising=False)
    seen: list[int] = []
    after_import.after_import(name, lambda module: seen.append(module.VALUE))
    after_import.after_import(name, lambda module: seen.append(2))  # one hook per module
    assert seen == []
    try:
        __import__(name)
        assert seen == [1]
        after_import.after_import(name, lambda module: seen.append(module.VALUE + 10))  # imported
        assert seen == [1, 11]
    finally:
        sys.modules.pop(name, None)
    assert not any(getattr(f, "name", None) == name for f in sys.meta_path)


class FakeRay:
    """What ``ray_workers`` asks of Ray: a cluster declaring ``declared`` units."""

    def __init__(self, declared: float, running_cluster: bool) -> None:
        self.declared = declared
        self.running_cluster = running_cluster
        self.inits: list[dict] = []
        self.util = SimpleNamespace(get_current_placement_group=lambda: None)

    def is_initialized(self) -> bool:
        return bool(self.inits)

    def init(self, **kwargs) -> None:
        if self.running_cluster and "resources" in kwargs:
            raise ValueError("When connecting to an existing cluster, resources must not be ...")
        self.inits.append(kwargs)
        if not self.running_cluster:
            self.declared = kwargs["resources"][CPU_RAY_RESOURCE]

    def cluster_resources(self) -> dict[str, float]:
        return {"CPU": 2.0, CPU_RAY_RESOURCE: self.declared} if self.declared else {"CPU": 2.0}

    def available_resources(self) -> dict[str, float]:
        return self.cluster_resources()


@pytest.fixture
def ray_workers():
    pytest.importorskip("ray", reason="Ray is not installed")
    from vllm_platform_template.devices.cpu import ray_workers

    return ray_workers


def _initialize(ray_workers, fake: FakeRay, world_size: int, monkeypatch) -> list[tuple]:
    monkeypatch.setattr(ray_workers, "ray", fake)
    calls: list[tuple] = []
    wrapped = ray_workers.with_resource_check(
        lambda *args, **kwargs: calls.append((args, kwargs)), ray_key=lambda: CPU_RAY_RESOURCE
    )
    config = SimpleNamespace(world_size=world_size, ray_runtime_env=None, placement_group=None)
    wrapped(config, require_gpu_on_driver=False)  # as vLLM 0.32's RayExecutorV2 calls it
    return calls


def test_a_local_ray_instance_declares_the_resource(ray_workers, monkeypatch) -> None:
    fake = FakeRay(declared=0, running_cluster=False)
    calls = _initialize(ray_workers, fake, 2, monkeypatch)
    assert fake.inits[0]["resources"] == {CPU_RAY_RESOURCE: 2.0}
    # then vLLM's own initialize_ray_cluster, with vLLM's arguments
    assert len(calls) == 1 and calls[0][1] == {"require_gpu_on_driver": False}


def test_a_cluster_short_of_the_resource_is_refused_at_once(ray_workers, monkeypatch) -> None:
    fake = FakeRay(declared=1, running_cluster=True)
    with pytest.raises(RuntimeError) as refused:
        _initialize(ray_workers, fake, 2, monkeypatch)
    assert fake.inits == [{"address": None, "runtime_env": None}]  # joined, declared nothing
    message = str(refused.value)
    assert "declares 1 'template_cpu'" in message and "needs 2" in message
    assert "ray start --head --resources '{\"template_cpu\": N}'" in message

    fake = FakeRay(declared=0, running_cluster=True)
    with pytest.raises(RuntimeError, match="declares 0 'template_cpu'"):
        _initialize(ray_workers, fake, 2, monkeypatch)


def test_a_cluster_with_the_resource_goes_on(ray_workers, monkeypatch) -> None:
    fake = FakeRay(declared=4, running_cluster=True)
    assert len(_initialize(ray_workers, fake, 2, monkeypatch)) == 1


def test_a_local_ray_that_cannot_start_says_so(ray_workers, monkeypatch) -> None:
    # tests/full_plugin/test_ray.py skips on this sentence (e.g. no /dev/shm, no free port)
    fake = FakeRay(declared=0, running_cluster=False)

    def init(**kwargs):
        raise OSError("no free port")

    fake.init = init  # type: ignore[method-assign]
    with pytest.raises(RuntimeError, match=f"{ray_workers.COULD_NOT_START}: OSError: no free"):
        _initialize(ray_workers, fake, 2, monkeypatch)
