"""The device registry: the one place that reaches a device folder by name.

:data:`DEVICE_PACKAGES` and :data:`PLATFORM_QUALNAMES` are read from the folders
present under ``devices/`` (each folder's ``__init__`` names its ``DEVICE_TYPE``
and ``PLATFORM_CLASS``), and :func:`folder_module` loads a folder's module by
device type, as vLLM resolves platforms by qualified name. A new device is a new
folder: nothing here names one. Standard library only: the platform entry point
reads it before vLLM is imported, and every layer may.
"""

from __future__ import annotations

import functools
import importlib
import importlib.util
import pkgutil
import types
from typing import Any

__all__ = ["DEVICE_PACKAGES", "PLATFORM_QUALNAMES", "folder_module"]

DEVICES_PACKAGE = "vllm_platform_template.devices"
"""The package whose sub-folders are the devices."""

DEVICE_PACKAGES: dict[str, str]
"""torch device type (= the VLLM_TEMPLATE_DEVICE value) -> the device's folder."""
PLATFORM_QUALNAMES: dict[str, str]
"""torch device type -> its vLLM Platform class, as the platform entry point returns it."""


@functools.cache
def _device_folders() -> tuple[dict[str, str], dict[str, str]]:
    packages: dict[str, str] = {}
    platforms: dict[str, str] = {}
    devices = importlib.import_module(DEVICES_PACKAGE)
    for info in sorted(pkgutil.iter_modules(devices.__path__), key=lambda i: i.name):
        if not info.ispkg:
            continue
        folder = importlib.import_module(f"{DEVICES_PACKAGE}.{info.name}")
        device_type: str = folder.DEVICE_TYPE
        if device_type in packages:
            raise RuntimeError(
                f"{folder.__name__} and {packages[device_type]} both name device type "
                f"{device_type!r}: one folder per device"
            )
        packages[device_type] = folder.__name__
        platforms[device_type] = f"{folder.__name__}.platform.{folder.PLATFORM_CLASS}"
    return packages, platforms


def folder_module(device_type: str, name: str, *, required: bool = True) -> types.ModuleType | None:
    """Module ``name`` of the folder of ``device_type`` (``device``, ``availability``, ...).

    None where that folder has no such module and ``required`` is false; a
    ``KeyError`` for a device type no folder names.
    """
    module = f"{_device_folders()[0][device_type]}.{name}"
    if not required and importlib.util.find_spec(module) is None:
        return None
    return importlib.import_module(module)


def __getattr__(name: str) -> Any:
    if name == "DEVICE_PACKAGES":
        return _device_folders()[0]
    if name == "PLATFORM_QUALNAMES":
        return _device_folders()[1]
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
