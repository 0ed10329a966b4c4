"""Run a callback right after a module is imported: how a patch waits for vLLM's import.

A patch of a module that costs an import nobody asked for (vLLM's Ray executor
imports Ray: about 1.4 s) waits for vLLM to import it. No vLLM hook: a
``sys.meta_path`` finder that wraps the module's ``exec_module`` once.
"""

from __future__ import annotations

import importlib.abc
import importlib.util
import sys
import types
from collections.abc import Callable
from typing import Any


class _AfterImport(importlib.abc.MetaPathFinder):
    """Runs ``callback(module)`` right after module ``name`` is executed (once)."""

    def __init__(self, name: str, callback: Callable[[types.ModuleType], None]) -> None:
        self.name = name
        self.callback = callback

    def find_spec(self, fullname: str, path: Any = None, target: Any = None) -> Any:
        if fullname != self.name:
            return None
        sys.meta_path.remove(self)  # one shot; the search below must not come back here
        spec = importlib.util.find_spec(fullname)
        loader = spec.loader if spec is not None else None
        if loader is None:
            return spec
        exec_module = loader.exec_module
        callback = self.callback

        def exec_then_callback(module: types.ModuleType) -> None:
            exec_module(module)
            callback(module)

        loader.exec_module = exec_then_callback  # type: ignore[method-assign]
        return spec


def after_import(name: str, callback: Callable[[types.ModuleType], None]) -> None:
    """``callback(module)`` now if module ``name`` is imported, else right after its import.

    A patch of a module that costs an import nobody asked for (vLLM's Ray executor
    imports Ray: about 1.4 s) waits for vLLM to import it; so does a registration
    for a class vLLM defines only when it imports a backend (``custom_ops/hw_agnostic.py``).
    """
    module = sys.modules.get(name)
    if module is not None:
        callback(module)
    elif not any(isinstance(f, _AfterImport) and f.name == name for f in sys.meta_path):
        sys.meta_path.insert(0, _AfterImport(name, callback))
