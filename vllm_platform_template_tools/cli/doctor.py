"""``vllm-template doctor``: what would run here, and why.

Reports the platform and device the plugin would select (from
``VLLM_TEMPLATE_DEVICE``, or ``--device``), the versions of vLLM, torch and the
kernel libraries, which build of vLLM's CPU kernels loads here and why (and how
it runs bf16), and every vLLM IR op with its providers - each one supported or not,
with the reason - and the provider priority lists that would apply in eager
mode and under each compile stage; for a device folder whose identity table
leaves speed APIs out, what runs in first light instead (its
``availability.first_light_parts``); and for a device folder, each row of the
torch extension's contract probed on the device (its ``torch_contract.probe``),
naming what the extension is missing; and one decode step's operators on the device,
each with what serves it - the extension's kernel, a torch composite, or the
extension's fallback (``step_operators.survey``).
"""

from __future__ import annotations

import argparse
import importlib
import importlib.metadata
import json
import os
from typing import Any

from vllm_platform_template.device_registry import DEVICE_PACKAGES, folder_module


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--device", help="device to diagnose (default: $VLLM_TEMPLATE_DEVICE)")
    parser.add_argument("--json", action="store_true", help="print one JSON object")


def _version(dist: str) -> str | None:
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return None


def collect(device: str | None) -> dict[str, Any]:
    from vllm_platform_template.platform_hooks.entry_point import select_platform
    from vllm_platform_template.settings import DEVICE_ENV

    environ = dict(os.environ)
    if device is not None:
        environ[DEVICE_ENV] = device
    selection = select_platform(environ)
    report: dict[str, Any] = {
        "selection": {
            "device": selection.device,
            "platform": selection.qualname if selection.problem is None else None,
            "active": selection.qualname is not None and selection.problem is None,
            "problem": selection.problem,
            "reason": selection.reason,
            "vllm_target_device": os.environ.get("VLLM_TARGET_DEVICE"),
        },
    }
    from vllm_platform_template.device import device_for

    devices = {name: device_for(name) for name in DEVICE_PACKAGES}
    kernel_packages = [p for d in devices.values() if d is not None for p in d.packages]
    report["versions"] = {
        name: _version(name)
        for name in ("vllm", "torch", *dict.fromkeys(kernel_packages), "vllm-platform-template")
    }
    if os.environ.get("VLLM_TARGET_DEVICE", "").lower() == "cpu":
        report["selection"]["problem"] = (
            "VLLM_TARGET_DEVICE=cpu is set: vLLM skips every out-of-tree platform plugin"
        )

    # Each device folder's kernel libraries, loaded and described before vllm.kernels,
    # whose import makes the selected platform load its own.
    report["libraries"] = {
        name: device.describe_libraries()
        for name, device in devices.items()
        if device is not None and device.describe_libraries is not None
    }
    import vllm.kernels  # noqa: F401  (vLLM's own providers, as Platform.import_ir_kernels)
    from vllm.ir.op import IrOp

    import vllm_platform_template.ir_impls  # noqa: F401  (registers the providers)
    from vllm_platform_template.ir_impls import PROVIDER_STATUS
    from vllm_platform_template.platform_hooks import policy

    ops: dict[str, Any] = {}
    for name, op in sorted(IrOp.registry.items()):
        providers = {}
        for provider, impl in op.impls.items():
            status = PROVIDER_STATUS.get(provider)
            reason = (
                status.reason
                if status
                else ("reference semantics" if provider == "native" else "registered by vLLM")
            )
            providers[provider] = {"supported": impl.supported, "reason": reason}
        ops[name] = {"providers": providers}
    diagnosed = (
        selection.device if selection.device in DEVICE_PACKAGES else next(iter(DEVICE_PACKAGES))
    )
    diagnosed_device = device_for(diagnosed)
    assert diagnosed_device is not None
    regimes = {
        "eager": (policy.MODE_NONE, "graph"),
        "compile graph stage": (policy.MODE_VLLM_COMPILE, "graph"),
        "compile fusion_only stage": (policy.MODE_VLLM_COMPILE, "fusion_only"),
    }
    for regime, (mode, stage) in regimes.items():
        priorities = policy.default_ir_op_priority(
            diagnosed_device.ir_provider,
            diagnosed_device.ir_ops,
            diagnosed_device.native_under_inductor,
            mode,
            stage,
            ops,
        )
        for op_name, priority in priorities.items():
            if op_name in ops:
                providers = ops[op_name]["providers"]
                effective = [p for p in priority if providers.get(p, {}).get("supported")]
                ops[op_name].setdefault("priority", {})[regime] = effective
    report["ir_ops"] = ops
    report["layer_replacements"] = layer_replacements()
    report["diagnosed_device"] = diagnosed
    # what a device folder runs in first light while its identity leaves speed APIs out
    availability = folder_module(diagnosed, "availability")
    report["first_light"] = list(getattr(availability, "first_light_parts", list)())
    # the torch extension's side of first light, probed on the device (a device folder's;
    # the CPU reference backend has none)
    contract = folder_module(diagnosed, "torch_contract", required=False)
    report["torch_contract"] = contract.probe() if contract is not None else {}
    from vllm_platform_template_tools.cli.step_operators import survey

    report["step_operators"] = survey(diagnosed_device.torch_device_type)
    return report


def layer_replacements() -> dict[str, dict[str, str]]:
    """vLLM layer -> the plugin's replacement, in vLLM's classic CustomOp registry and in
    its hardware-agnostic one; each replacement's ``forward_oot`` calls the device kernels."""
    from vllm.model_executor import custom_op

    from vllm_platform_template.custom_ops import register_custom_ops

    register_custom_ops()
    registries: dict[str, dict[str, type]] = {"CustomOp": dict(custom_op.op_registry_oot)}
    try:
        from vllm.model_executor.hw_agnostic import custom_op as hw_agnostic
    except ImportError:  # a vLLM without the hardware-agnostic layers
        pass
    else:
        registries["hardware-agnostic"] = dict(hw_agnostic.op_registry_oot)
    plugin = register_custom_ops.__module__.split(".")[0]  # the plugin package's name
    return {
        kind: {
            layer: cls.__name__
            for layer, cls in sorted(registry.items())
            if cls.__module__.startswith(plugin)
        }
        for kind, registry in registries.items()
    }


def print_human(report: dict[str, Any]) -> None:
    sel = report["selection"]
    print("== platform selection")
    if sel["problem"]:
        print(f"  PROBLEM: {sel['problem']}")
    elif sel["active"]:
        print(f"  {sel['reason']} -> {sel['platform']}")
    else:
        print(f"  inactive: {sel['reason']} (stock vLLM runs)")
    print("== versions")
    for name, version in report["versions"].items():
        print(f"  {name:<30} {version or '-'}")
    for device_name, libraries in report["libraries"].items():
        print(f"== {libraries.get('name', 'kernel libraries')} ({device_name})")
        details = "".join(
            f"; {key} {value}"
            for key, value in libraries.items()
            if key not in ("name", "loaded", "reason", "path")
        )
        print(f"  {libraries.get('loaded') or 'none'}: {libraries.get('reason', '')}{details}")
    if report["first_light"]:
        print(f"== first light on {report['diagnosed_device']}: the speed tier still to do")
        for line in report["first_light"]:
            print(f"  {line}")
    if report["torch_contract"]:
        print(f"== the torch extension's contract on {report['diagnosed_device']}")
        for row, problem in report["torch_contract"].items():
            print(f"  [{'no ' if problem else 'yes'}] {row}{': ' + problem if problem else ''}")
    steps = report["step_operators"]
    print(f"== one decode step's operators on {report['diagnosed_device']}, and what serves each")
    if "skipped" in steps:
        print(f"  not run: {steps['skipped']}")
    for name, entry in steps.get("operators", {}).items():
        print(f"  {entry['calls']:3d}  {name:<40} {entry['served_by']}")
    print(f"== vLLM IR ops (priorities for device {report['diagnosed_device']})")
    for op, entry in report["ir_ops"].items():
        print(f"  {op}")
        for provider, info in entry["providers"].items():
            mark = "yes" if info["supported"] else "no "
            print(f"    [{mark}] {provider:<16} {info['reason']}")
        for regime, priority in entry.get("priority", {}).items():
            print(f"    priority, {regime}: {priority}")
    print("== vLLM layers replaced by the plugin (forward_oot: the device kernels)")
    for kind, layers in report["layer_replacements"].items():
        for layer, replacement in layers.items():
            print(f"  {kind:<18} {layer:<16} -> {replacement}")
    print(
        "  (the Transformers backend's TPAwareRMSNorm is replaced once vLLM imports that "
        "backend, with VLLM_USE_HW_AGNOSTIC=1)"
    )


def main(args: argparse.Namespace) -> int:
    report = collect(args.device)
    if args.json:
        print(json.dumps(report))
    else:
        print_human(report)
    return 0
