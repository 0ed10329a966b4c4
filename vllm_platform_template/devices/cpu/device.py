"""The CPU device object: ``DEVICE``, what the rest of the plugin asks about this device.

Read by ``vllm_platform_template.device.device_for``; imports no vLLM and no
platform code (only this folder's kernels, loaded lazily).
"""

from __future__ import annotations

from typing import Any

from vllm_platform_template.device import (
    LORA_PUNICA_WRAPPER,
    AttentionKernels,
    KernelTable,
    TemplateDevice,
)
from vllm_platform_template.devices.cpu import kernels
from vllm_platform_template.devices.cpu.graphs import CpuGraphEmulation
from vllm_platform_template.devices.cpu.vllm_cpu_build import ISA_ENV

# The CPU emulation saves no launch time, so its default graph sizes stay few and
# small (capture cost at start-up; coverage of vLLM's padding and dispatch).
MAX_CAPTURE_SIZE = 16


def kernel_table() -> KernelTable:
    return KernelTable(
        rms_norm=kernels.rms_norm,
        rms_norm_supports=kernels.rms_norm_supports,
        fused_add_rms_norm=kernels.fused_add_rms_norm_,
        fused_add_rms_norm_supports=kernels.fused_add_rms_norm_supports,
        gelu_and_mul_sparse=kernels.gelu_and_mul_sparse,
        gelu_and_mul_sparse_supports=kernels.gelu_and_mul_sparse_supports,
        silu_and_mul=kernels.silu_and_mul,
        rotary_embedding_=kernels.rotary_embedding_,
        rotary_ready=lambda: kernels.vllm_cpu_op("rotary_embedding") is not None,
        w8a8_int8_linear=kernels.w8a8_int8_linear,
        fused_moe=kernels.fused_moe,
        fused_moe_w8a8_int8=kernels.fused_moe_w8a8_int8,
    )


def load_libraries() -> None:
    """vLLM's CPU build for this CPU's ISA (``vllm_cpu_build``; ``VLLM_TEMPLATE_CPU_ISA``)."""
    from vllm_platform_template.devices.cpu import vllm_cpu_build

    vllm_cpu_build.load_cpu_kernels()


def describe_libraries() -> dict[str, Any]:
    """The vLLM CPU kernel build this process loaded (``vllm_cpu_build``), and why."""
    from vllm_platform_template.devices.cpu import vllm_cpu_build

    build = vllm_cpu_build.load_cpu_kernels()
    return {
        "name": "vLLM CPU kernels",
        "loaded": build.module,
        "path": build.path,
        "isa": build.isa,
        "host_isa": build.host_isa,
        "bf16": vllm_cpu_build.describe_bf16(build),
        "reason": build.reason,
    }


def checkpoint_dtype(dtype: str) -> tuple[str, str | None]:
    """A bf16 checkpoint runs in bf16 wherever one of vLLM's kernel builds loaded (every
    build runs bf16: ``vllm_cpu_build.bf16_problem``, the rule the bf16 tests follow
    too); only without one in float32, with the reason."""
    if dtype != "bfloat16":
        return dtype, None
    from vllm_platform_template.devices.cpu import vllm_cpu_build

    problem = vllm_cpu_build.bf16_problem(vllm_cpu_build.load_cpu_kernels())
    return ("float32", problem) if problem is not None else (dtype, None)


# vLLM's CPU worker advises these in LD_PRELOAD on x86 Linux (cpu_worker.py, init_device).
CPU_PRELOAD_ADVICE = ("libtcmalloc", "libiomp")


def explain_log_warnings(report: dict[str, Any]) -> str:
    """What the warnings vLLM's CPU worker logs are about (the e2e tier allows them)."""
    if "worker_ld_preload" not in report:
        return ""
    missing = [lib for lib in CPU_PRELOAD_ADVICE if lib not in report["worker_ld_preload"]]
    notes = []
    if missing:
        notes.append(
            f"vLLM's CPU worker: {', '.join(missing)} not in LD_PRELOAD (optional speed-ups, "
            "vLLM's CPU install guide)"
        )
    notes.append("torch's NUMA binding notice (the worker's memory stays on its CPUs' node)")
    return "; ".join(notes)


def attention_kernels() -> AttentionKernels:
    from vllm_platform_template.devices.cpu.attention_kernels import CpuAttentionKernels

    return CpuAttentionKernels()


DEVICE = TemplateDevice(
    name="cpu",
    torch_device_type="cpu",
    ir_provider="template_cpu",
    # every machine has a CPU; the kernels fall back to torch where vLLM's are absent
    status=lambda: (True, "vLLM's C++ CPU kernels when loaded in torch.ops._C, else torch"),
    kernels=kernel_table,
    load_libraries=load_libraries,
    ir_ops=("rms_norm", "fused_add_rms_norm", "gelu_and_mul_sparse"),
    fused_add_rms_norm_inplace=True,
    graph_backend=lambda pool: CpuGraphEmulation(),
    attention=attention_kernels,
    # vLLM's C++ RMSNorm kernels beat Inductor's generated code at decode and mid
    # shapes and about tie at the largest; the sparse GELU reduction is faster fused
    # by Inductor (`vllm-template bench-ops --for-regime graph`).
    native_under_inductor=("gelu_and_mul_sparse",),
    # The emulation costs a copy per piece and saves nothing: no graphs unless asked.
    default_graph_mode="NONE",
    graph_mode_note="its graph emulation saves no time",
    max_capture_size=lambda max_num_seqs, decode_query_len: max(
        1, min(MAX_CAPTURE_SIZE, 2 * max_num_seqs * decode_query_len)
    ),
    environment_variables={ISA_ENV: "avx2 or avx512: force an older vllm-cpu kernel build"},
    packages=("vllm-cpu",),
    describe_libraries=describe_libraries,
    checkpoint_dtype=checkpoint_dtype,
    explain_log_warnings=explain_log_warnings,
    punica_wrapper=LORA_PUNICA_WRAPPER,
)
