"""``TemplateGraphWrapper``: vLLM's static-graph wrapper protocol for the template platforms.

vLLM hook: ``Platform.get_static_graph_wrapper_cls`` names this class; vLLM's
``VllmBackend`` wraps every compiled piece in it with
``runtime_mode=PIECEWISE`` and ``cudagraph_options`` (``debug_log_enable``,
``gc_disable``, ``weak_ref_output``), implementing
``vllm.compilation.base_static_graph.AbstractStaticGraphWrapper``.

Per call it reads the forward context: when the runtime mode is not this
wrapper's, it runs the piece as is (profile and warm-up runs, batches above
the largest capture size); otherwise it captures one graph per
``BatchDescriptor`` the first time and replays it afterwards, through the
device's graph backend (``devices/<name>/graphs.py``: the device's graph API, or
the CPU reference backend's emulation).

- Garbage collection is off during capture (``gc_disable``), as in vLLM.
- Outputs are kept as weak references where the backend's graph pool owns
  them (``weak_ref_output``).
- Debug mode (``additional_config.template.graph_debug`` or vLLM DEBUG logs)
  checks at every replay that the inputs sit at the captured addresses.
- A size whose capture fails runs eagerly from then on, with one warning.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from contextlib import ExitStack
from dataclasses import dataclass
from typing import Any

import torch
from vllm.compilation.counter import compilation_counter
from vllm.compilation.cuda_graph import CUDAGraphOptions
from vllm.compilation.monitor import validate_cudagraph_capturing_enabled
from vllm.config import CUDAGraphMode, VllmConfig
from vllm.forward_context import BatchDescriptor, get_forward_context, is_forward_context_available

from vllm_platform_template import patches
from vllm_platform_template.device import CapturedGraph, GraphBackend, platform_device
from vllm_platform_template.graph_wrapper.stats import STATS, GraphStats
from vllm_platform_template.log import get_logger
from vllm_platform_template.settings import options_of

logger = get_logger(__name__)


class GraphInputMovedError(RuntimeError):
    """A replay received inputs at other addresses than the capture."""


@dataclass
class _Entry:
    graph: CapturedGraph | None = None
    input_addresses: list[int] | None = None
    eager: bool = False  # capture failed: this size runs eagerly


def _tensor_addresses(args: tuple[Any, ...]) -> list[int]:
    return [x.data_ptr() for x in args if isinstance(x, torch.Tensor)]


class TemplateGraphWrapper:
    """Captures and replays one compiled piece per batch descriptor."""

    stats: GraphStats = STATS  # where its captures and replays are counted

    def __init__(
        self,
        runnable: Callable[..., Any],
        vllm_config: VllmConfig,
        runtime_mode: CUDAGraphMode,
        cudagraph_options: CUDAGraphOptions | None = None,
        backend: GraphBackend | None = None,
    ) -> None:
        if runtime_mode == CUDAGraphMode.NONE:
            raise ValueError("TemplateGraphWrapper needs a graph runtime mode, got NONE")
        self.runnable = runnable
        self.vllm_config = vllm_config
        self.runtime_mode = runtime_mode
        self.options = cudagraph_options or CUDAGraphOptions()
        self.debug = options_of(vllm_config).graph_debug or logger.isEnabledFor(logging.DEBUG)
        self.backend = backend or self._platform_backend()
        self.stats.backend = self.backend.name
        self.entries: dict[BatchDescriptor, _Entry] = {}

    @staticmethod
    def _platform_backend() -> GraphBackend:
        """The current device's graph backend, in vLLM's global graph pool."""
        from vllm.platforms import current_platform

        device = platform_device(current_platform)
        pool = current_platform.get_global_graph_pool() if device.uses_graph_pool else None
        return device.graph_backend(pool)

    # --- protocol -----------------------------------------------------------
    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if not is_forward_context_available():
            return self.runnable(*args, **kwargs)
        context = get_forward_context()
        descriptor = context.batch_descriptor
        if context.cudagraph_runtime_mode != self.runtime_mode or descriptor is None:
            return self.runnable(*args, **kwargs)

        entry = self.entries.setdefault(descriptor, _Entry())
        if entry.eager:
            return self.runnable(*args, **kwargs)
        if entry.graph is None:
            return self._capture(entry, descriptor, args, kwargs)
        if self.debug:
            self._check_addresses(entry, descriptor, args)
        self.backend.replay(entry.graph)
        self.stats.replays[descriptor.num_tokens] += 1
        return entry.graph.output

    def _capture(
        self, entry: _Entry, descriptor: BatchDescriptor, args: tuple, kwargs: dict
    ) -> Any:
        validate_cudagraph_capturing_enabled()
        if self.options.debug_log_enable:
            logger.debug("capturing %s graph for %s", self.backend.name, descriptor)
        entry.input_addresses = _tensor_addresses(args)
        try:
            with ExitStack() as stack:
                if self.options.gc_disable:
                    # Pieces are captured back to back (registry: patches.py).
                    stack.enter_context(patches.no_gc_during_capture())
                graph = self.backend.capture(lambda: self.runnable(*args, **kwargs))
        except Exception as e:
            entry.eager = True
            self.stats.eager_fallbacks[descriptor.num_tokens] += 1
            logger.warning(
                "template graph wrapper: %s graph capture failed for %s (%s: %s); this size "
                "runs eagerly from now on",
                self.backend.name,
                descriptor,
                type(e).__name__,
                e,
            )
            return self.runnable(*args, **kwargs)
        output = graph.output
        if self.options.weak_ref_output:
            graph.output = self.backend.weak_output(output)
        entry.graph = graph
        compilation_counter.num_cudagraph_captured += 1
        self.stats.captures[descriptor.num_tokens] += 1
        return output

    def _check_addresses(
        self, entry: _Entry, descriptor: BatchDescriptor, args: tuple[Any, ...]
    ) -> None:
        addresses = _tensor_addresses(args)
        if addresses == entry.input_addresses:
            return
        captured = entry.input_addresses or []
        moved = [
            f"input {i}: 0x{old:x} -> 0x{new:x}"
            for i, (old, new) in enumerate(zip(captured, addresses, strict=False))
            if old != new
        ]
        if len(captured) != len(addresses):
            moved.append(f"{len(captured)} tensor inputs at capture, {len(addresses)} now")
        raise GraphInputMovedError(
            f"graph replay for {descriptor} got inputs at other addresses than the capture "
            f"({'; '.join(moved)}). A replay reads the captured addresses, so the result would be "
            "computed from stale data. Fix: keep the piece's inputs in persistent buffers "
            "(vLLM's model runner slices its input_ids/positions buffers; a custom model runner "
            "or model must do the same), or run with cudagraph_mode=NONE."
        )

    # --- helpers vLLM and tests use -------------------------------------------
    def __getattr__(self, key: str) -> Any:
        runnable = self.__dict__.get("runnable")
        if runnable is not None and hasattr(runnable, key):
            return getattr(runnable, key)
        raise AttributeError(key)

    def unwrap(self) -> Callable[..., Any]:
        runnable = self.runnable
        return runnable.unwrap() if hasattr(runnable, "unwrap") else runnable

    def clear_graphs(self) -> None:
        """Drop every captured graph (they are recaptured on next use)."""
        self.entries.clear()
