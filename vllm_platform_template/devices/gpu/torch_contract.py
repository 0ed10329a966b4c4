"""What vLLM calls of the device's torch extension, each piece probed on the live device.

vLLM hook served: none; this is the first-light contract between the device's
torch extension and the plugin (docs/porting-guide.md, "The torch-extension
contract", gives each row with the torch hook behind it, how the PrivateUse1
test device provides it and the test). ``vllm-template doctor`` runs
:func:`probe` for the device it diagnoses and names every row that fails, so a
port sees what its extension still lacks before an engine starts. Each probe
uses only the identity table (``identity.py``) and torch's device-neutral APIs;
the test device passes every row (``tests/shared/test_torch_contract.py``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from vllm_platform_template.devices.gpu.identity import IDENTITY, DeviceIdentity


@dataclass(frozen=True)
class Row:
    """One piece of the contract: what vLLM does with it, and a check on the live device."""

    name: str
    vllm_calls: str
    check: Callable[[Any, Any, DeviceIdentity], None]
    """``(torch, device, identity) -> None``; raises when the extension does not provide it."""


def _accelerator(torch: Any, device: Any, identity: DeviceIdentity) -> None:
    current = torch.accelerator.current_accelerator()
    assert current is not None and current.type == device.type, f"it is {current}"
    assert torch.accelerator.device_count() >= 1


def _set_device(torch: Any, device: Any, identity: DeviceIdentity) -> None:
    torch.accelerator.set_device_index(device.index)
    assert torch.accelerator.current_device_index() == device.index


def _memory(torch: Any, device: Any, identity: DeviceIdentity) -> None:
    before = torch.accelerator.memory_allocated(device.index)
    block = torch.empty(1 << 20, dtype=torch.uint8, device=device)
    assert torch.accelerator.memory_allocated(device.index) >= before + (1 << 20)
    free, total = torch.accelerator.get_memory_info(device.index)
    assert 0 < free <= total, (free, total)
    assert "allocated_bytes.all.peak" in torch.accelerator.memory_stats(device.index)
    torch.accelerator.reset_peak_memory_stats(device.index)
    torch.accelerator.empty_cache()
    del block


def _operators(torch: Any, device: Any, identity: DeviceIdentity) -> None:
    a = torch.arange(12, dtype=torch.float32).reshape(3, 4)
    on_device = a.to(device)
    on_device[:, 1].add_(1)  # a view writes into its base
    product = (on_device @ on_device.t()).cpu()
    expected = a.clone()
    expected[:, 1] += 1
    assert torch.equal(product, expected @ expected.t())


def _streams_and_events(torch: Any, device: Any, identity: DeviceIdentity) -> None:
    stream = torch.Stream(device=device)
    event = torch.Event(device=device)
    event.record(stream)
    event.synchronize()
    assert event.query()
    torch.accelerator.synchronize(device.index)


def _pinned_memory(torch: Any, device: Any, identity: DeviceIdentity) -> None:
    pinned = torch.ones(16).pin_memory()
    assert pinned.is_pinned()
    assert torch.equal(pinned.to(device, non_blocking=True).cpu(), pinned)


def _generators(torch: Any, device: Any, identity: DeviceIdentity) -> None:
    generator = torch.Generator(device=device)
    generator.manual_seed(0)
    first = torch.rand(4, device=device, generator=generator).cpu()
    generator.manual_seed(0)
    assert torch.equal(first, torch.rand(4, device=device, generator=generator).cpu())


def _dtypes(torch: Any, device: Any, identity: DeviceIdentity) -> None:
    supported = torch.accelerator.get_device_capability(device.index)["supported_dtypes"]
    assert torch.float32 in supported, sorted(map(str, supported))


def _device_module(torch: Any, device: Any, identity: DeviceIdentity) -> None:
    module = getattr(torch, identity.torch_module)
    assert module.is_available() and module.device_count() >= 1
    assert isinstance(module.get_device_name(device.index), str)
    assert module.get_device_properties(device.index).total_memory > 0
    module.manual_seed_all(0)


def _dist_backend(torch: Any, device: Any, identity: DeviceIdentity) -> None:
    backend = identity.dist_backend
    assert backend is not None, "identity.py names none"
    assert torch.distributed.is_backend_available(backend), f"{backend!r} is not registered"


CONTRACT = (
    Row("accelerator", "current_platform's device; torch.accelerator.*", _accelerator),
    Row("device guard", "Platform.set_device: one device per rank", _set_device),
    Row("device memory", "the KV cache sized from free memory; memory profiling", _memory),
    Row("operators", "the model, the reference kernels and attention", _operators),
    Row("streams and events", "the model runner's torch.Event, synchronize", _streams_and_events),
    Row("pinned host memory", "the model runner's CpuGpuBuffer(pin_memory=True)", _pinned_memory),
    Row("generators", "seeded sampling: torch.Generator(device)", _generators),
    Row("dtypes", "Platform.check_if_supports_dtype", _dtypes),
    Row("device module", "device name, total memory, manual_seed_all", _device_module),
    Row("torch.distributed backend", "the device group of every parallel group", _dist_backend),
)


def probe(identity: DeviceIdentity = IDENTITY, index: int = 0) -> dict[str, str | None]:
    """``{row name: None if it holds, else what is missing}`` on ``identity``'s device."""
    import torch

    if not identity.present():
        return {row.name: f"torch sees no {identity.device_type} device" for row in CONTRACT}
    device = torch.device(identity.device_type, index)
    results: dict[str, str | None] = {}
    for row in CONTRACT:
        try:
            row.check(torch, device, identity)
            results[row.name] = None
        except Exception as error:  # every failure is a finding, reported per row
            results[row.name] = f"{type(error).__name__}: {error}".strip()
    return results
