"""What ran where: the report of the demo, the tests and the benchmarks.

vLLM hook: ``LLM.collective_rpc("template_report")`` runs :func:`worker_report`
inside each template worker (the model lives there, not in the front end), to
show which attention backend and IR providers served the model and what the
compiler and the graph wrapper did. For stock vLLM (plugin inactive) only the
front end's view of the config is reported.
"""

from __future__ import annotations

import inspect
import os
import re
from typing import Any

# How vLLM's layers call an IR op: ``ir.ops.rms_norm(...)``, ``ir.ops.<op>.maybe_inplace(...)``.
_IR_CALL = re.compile(r"\bir\.ops\.(\w+)")


def _attention_backends(worker: Any) -> list[str]:
    from vllm.model_executor.layers.attention.attention import Attention

    names = set()
    model = worker.model_runner.get_model()
    for module in model.modules():
        if isinstance(module, Attention):
            names.add(module.attn_backend.get_name())
    return sorted(names)


def _custom_op_layers(worker: Any) -> dict[str, list[str]]:
    """``{layer class: sorted forward methods in use}`` for the model's vLLM CustomOps,
    the classic ones and vLLM's hardware-agnostic ones (their own registry)."""
    from vllm.model_executor.custom_op import CustomOp

    kinds: tuple[type, ...] = (CustomOp,)
    try:
        from vllm.model_executor.hw_agnostic.custom_op import CustomOp as HwAgnosticOp

        kinds += (HwAgnosticOp,)
    except ImportError:  # a vLLM without the hardware-agnostic layers
        pass
    layers: dict[str, set[str]] = {}
    for module in worker.model_runner.get_model().modules():
        if isinstance(module, kinds):
            method = getattr(module, "_forward_method", None)
            name = getattr(method, "__name__", "?")
            layers.setdefault(type(module).__name__, set()).add(name)
    return {cls: sorted(methods) for cls, methods in sorted(layers.items())}


def _ir_callers(model: Any) -> dict[str, list[str]]:
    """``{IR op: sorted layer classes of ``model`` whose code calls it}``.

    Read from the source of each layer class (and its vLLM or template bases):
    vLLM's layers call IR ops as ``ir.ops.<name>``. An op no layer calls is not
    called by this model in any mode (eager or compiled); e.g. Llama's layers
    call ``rms_norm`` and ``fused_add_rms_norm`` (``RMSNorm``) and nothing calls
    ``gelu_and_mul_sparse`` (``GeluAndMulSparse``, Gemma 3n).
    """
    callers: dict[str, set[str]] = {}
    seen: set[type] = set()
    for module in model.modules():
        layer = type(module)
        if layer in seen:
            continue
        seen.add(layer)
        for cls in layer.__mro__:
            if not cls.__module__.startswith(("vllm.", "vllm_platform_template.")):
                continue
            try:
                source = inspect.getsource(cls)
            except (OSError, TypeError):
                continue
            for op in set(_IR_CALL.findall(source)):
                callers.setdefault(op, set()).add(layer.__name__)
    return {op: sorted(names) for op, names in callers.items()}


def _ir_providers(worker: Any) -> dict[str, dict[str, Any]]:
    """Priority list and the provider dispatch picks for this model's arguments."""
    import torch
    from vllm.ir.op import IrOp

    model_config = worker.model_config
    hidden = model_config.get_hidden_size()
    dtype = model_config.dtype
    device = next(worker.model_runner.get_model().parameters()).device
    eps = 1e-5
    x = torch.zeros(4, hidden, dtype=dtype, device=device)
    weight = torch.ones(hidden, dtype=dtype, device=device)
    sample_args: dict[str, tuple] = {
        "rms_norm": (x, weight, eps, None),
        "fused_add_rms_norm": (x, x.clone(), weight, eps, None),
        "gelu_and_mul_sparse": (
            torch.zeros(4, 2 * hidden, dtype=dtype, device=device),
            1.0,
            "none",
        ),
    }
    callers = _ir_callers(worker.model_runner.get_model())
    report: dict[str, dict[str, Any]] = {}
    for name, op in sorted(IrOp.registry.items()):
        entry: dict[str, Any] = {"priority": op.get_priority(), "called_by": callers.get(name, [])}
        if name in sample_args and op.get_priority():
            entry["selected"] = op.dispatch(*sample_args[name]).provider
        elif name in sample_args:
            entry["selected"] = "native"
        report[name] = entry
    return report


def _quantized_and_moe(model: Any) -> dict[str, Any]:
    """The model's quantized linear layers and MoE layers, by the kernel or method that
    serves them, and the template ops' calls in this process (eager and captured)."""
    from vllm_platform_template.device import OP_CALLS

    linear: dict[str, int] = {}
    experts: dict[str, int] = {}
    for module in model.modules():
        scheme = getattr(module, "scheme", None)
        kernel = getattr(scheme, "kernel", None)
        if kernel is not None:
            name = type(kernel).__name__
            linear[name] = linear.get(name, 0) + 1
        method = getattr(module, "quant_method", None)
        if method is not None and hasattr(module, "w13_weight"):
            name = type(method).__name__
            experts[name] = experts.get(name, 0) + 1
    return {
        "quantized_linear_kernels": linear,
        "moe_methods": experts,
        "template_op_calls": {
            entry: dict(OP_CALLS[entry])
            for entry in ("w8a8_int8_linear", "fused_moe", "fused_moe_w8a8_int8")
        },
    }


def config_report(vllm_config: Any) -> dict[str, Any]:
    """Platform and compilation settings as vLLM resolved them."""
    from vllm.platforms import current_platform

    cc = vllm_config.compilation_config
    platform_cls = type(current_platform)
    return {
        "platform": f"{platform_cls.__module__}.{platform_cls.__qualname__}",
        "device": current_platform.device_type,
        "compilation_mode": cc.mode.name if cc.mode is not None else None,
        "compile_backend": cc.backend,
        "cudagraph_mode": cc.cudagraph_mode.name if cc.cudagraph_mode is not None else None,
        "custom_ops": list(cc.custom_ops),
    }


def _placement(worker: Any) -> dict[str, Any]:
    """Where the model's weights and the KV cache live, and the device's own memory count.

    Devices and bytes are read from the tensors themselves; ``device_memory_allocated``
    is what the device's allocator reports (``torch.accelerator``), so a test can see
    that the bytes came from the device and not from the host.
    """
    import torch

    model = worker.model_runner.get_model()
    weights = [*model.parameters(), *model.buffers()]
    kv_caches = [t for t in getattr(worker.model_runner, "kv_caches", []) if t is not None]
    # layers' caches may be views of one buffer: each storage once
    kv_storages = {t.untyped_storage().data_ptr(): t.untyped_storage() for t in kv_caches}
    placement: dict[str, Any] = {
        "weights": sorted({str(t.device) for t in weights}),
        "weight_bytes": sum(t.numel() * t.element_size() for t in weights),
        "kv_cache": sorted({str(t.device) for t in kv_caches}),
        "kv_cache_bytes": sum(storage.nbytes() for storage in kv_storages.values()),
    }
    accelerator = torch.accelerator.current_accelerator()
    device = worker.device
    if accelerator is not None and device.type == accelerator.type:
        # torch.accelerator's count where this torch has it, else the device module's
        allocated = getattr(torch.accelerator, "memory_allocated", None)
        if allocated is None:
            allocated = torch.get_device_module(device.type).memory_allocated
        placement["device_memory_allocated"] = allocated(device.index)
    return placement


def worker_report(worker: Any) -> dict[str, Any]:
    """Runs inside a template worker (its ``template_report`` RPC); plain data only."""
    report = config_report(worker.vllm_config)
    model = worker.model_runner.get_model()
    report["model_class"] = f"{type(model).__module__}.{type(model).__qualname__}"
    report["attention_backends"] = _attention_backends(worker)
    report["ir_ops"] = _ir_providers(worker)
    report["custom_op_layers"] = _custom_op_layers(worker)
    report.update(_quantized_and_moe(model))
    report["placement"] = _placement(worker)
    # vLLM's CPU worker warns for each of libtcmalloc and libiomp missing from it.
    report["worker_ld_preload"] = os.environ.get("LD_PRELOAD", "")
    stats = getattr(worker, "template_stats", None)
    if callable(stats):
        report.update(stats())
    return report


def engine_report(llm: Any) -> dict[str, Any]:
    """Report for an ``LLM``: from the first worker on the template platform, else the config."""
    from vllm.platforms import current_platform

    if hasattr(type(current_platform), "template_device"):  # a template platform is active
        return dict(llm.collective_rpc("template_report")[0])
    report = config_report(llm.llm_engine.vllm_config)
    report.update({"attention_backends": [], "ir_ops": {}, "custom_op_layers": {}})
    return report
