"""The patch registry's claim: no module outside it rebinds vLLM or torch objects."""

from __future__ import annotations

import re
from pathlib import Path

from vllm_platform_template.patches import PATCHES, all_patches

PACKAGE = Path(__file__).resolve().parents[2] / "vllm_platform_template"
# mock.patch / patch.object, MethodType rebinding, assignment to a vllm/torch module attribute
# (torch's own ``<config>.patch(...)`` API for config values is not a rebinding)
REBINDING = re.compile(
    r"unittest\.mock|(?<![\w.])patch\(|patch\.object|types\.MethodType|"
    r"^\s*(?:vllm|torch)\.[\w.]+\s*=[^=]",
    re.MULTILINE,
)


# The registry's modules: each ``patches.py``, and the code of its shutdown and signal entries.
REGISTRY_CODE = ("patches.py", "shutdown.py")


def test_no_rebinding_outside_the_registry() -> None:
    offenders = []
    for path in PACKAGE.rglob("*.py"):
        if path.name in REGISTRY_CODE:
            continue
        for match in REBINDING.finditer(path.read_text()):
            offenders.append(f"{path.relative_to(PACKAGE)}: {match.group(0).strip()}")
    assert offenders == [], offenders


def test_every_entry_documents_itself() -> None:
    for patch in all_patches():
        assert patch.why and patch.upstream and patch.remove_when, patch.name
        assert (patch.scope == "process") == (patch.apply is not None), patch.name
        assert patch.scope in ("process", "call") and (patch.scope == "process" or patch.caller)


def test_the_shutdown_patches_code_is_named_after_its_entries() -> None:
    """``shutdown.py`` rebinds only for the registry: each function there that applies an
    entry bears the entry's name."""
    from vllm_platform_template import shutdown

    applied_there = [
        p for p in all_patches() if getattr(p.apply, "__module__", "") == shutdown.__name__
    ]
    assert applied_there, "the shutdown patches apply process_exit.py's functions"
    assert [p.name for p in applied_there if p.apply.__name__ != p.name] == []  # type: ignore[union-attr]


def test_the_registry_holds_every_device_folders_entries() -> None:
    """Each device folder's ``patches.py`` joins the registry, its entries for its device."""
    import importlib
    import importlib.util

    from vllm_platform_template.device_registry import DEVICE_PACKAGES

    names = [patch.name for patch in all_patches()]
    assert len(names) == len(set(names)), names
    assert set(PATCHES) <= set(all_patches())
    folders = 0
    for device, package in DEVICE_PACKAGES.items():
        if importlib.util.find_spec(f"{package}.patches") is None:
            continue
        folders += 1
        for patch in importlib.import_module(f"{package}.patches").PATCHES:
            assert patch in all_patches() and patch.devices == (device,), patch.name
    assert folders >= 1


def test_a_process_another_thread_reaped_is_not_alive_to_vllms_shutdown() -> None:
    """vLLM's liveness monitor may reap the engine first; multiprocessing then says 'alive'."""
    import multiprocessing
    import os
    import time

    from vllm_platform_template.shutdown import ReapedAwareProcess

    process = multiprocessing.get_context("fork").Process(target=time.sleep, args=(0,))
    process.start()
    os.waitpid(process.pid, 0)  # the other thread's reap
    assert process.is_alive()  # multiprocessing's answer: ECHILD read as "not exited"
    assert not ReapedAwareProcess(process).is_alive()
    assert ReapedAwareProcess(process).name == process.name  # everything else delegated
    running = multiprocessing.get_context("fork").Process(target=time.sleep, args=(30,))
    running.start()
    try:
        assert ReapedAwareProcess(running).is_alive()
    finally:
        running.kill()
        running.join()
