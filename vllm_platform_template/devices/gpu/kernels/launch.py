"""Triton kernels launched through their compiled form: the JIT's per-call work done once.

``kernel[grid](*args)`` binds every argument, derives its specialization
(dtype, 16-byte alignment of each pointer, ``== 1`` / ``% 16`` of each
integer) and hashes it into a cache key on every call: tens of microseconds of
host time per launch, paid by every layer of every eager or piecewise step.
:class:`Launch` is one kernel at one grid with fixed compile-time constants,
made once per batch shape by the attention planner. Its first call with a tuple
of scalars goes through Triton (compiling if needed) and keeps the compiled
kernel under those scalars (Triton specializes on their values); later calls
with the same scalars and 16-byte aligned tensors call the compiled launcher
directly. New scalars, or any unaligned tensor, go through Triton again, so the
shortcut never runs a kernel compiled for other inputs.

Under Triton's interpreter (``TRITON_INTERPRET=1``, the CPU tests) every call
goes through the interpreter. The compiled launcher's calling convention
(``CompiledKernel.run(gx, gy, gz, stream, function, packed_metadata,
launch_metadata, enter_hook, exit_hook, *args)``, every signature argument in
order) is Triton's own ``JITFunction.run``; it is the same in Triton 3.6 and
3.9 (``tests/devices/gpu/speed_tier/test_triton_kernels.py`` launches through it on the device).

vLLM hook served: none directly; the attention kernels of ``TEMPLATE_ATTN``
(``attention_kernels.py``) launch through it.
"""

from __future__ import annotations

import functools
import operator
from typing import Any

import torch
from triton import knobs
from triton.runtime.driver import driver

from vllm_platform_template.devices.gpu.kernels import is_interpreted


class Launch:
    """One Triton kernel at one grid with its compile-time constants bound.

    The kernel lists its tensor arguments first, then its scalars, then its
    constexprs; a call passes the tensors and the scalars as two tuples. A
    Launch serves one dtype per tensor argument (its plan's): the attention
    planner makes one per layout.
    """

    __slots__ = (
        "_compiled",
        "_constant_values",
        "_constants",
        "_interpreted",
        "grid",
        "kernel",
        "options",
    )

    def __init__(
        self,
        kernel: Any,
        grid: tuple[int, int, int],
        constants: dict[str, Any],
        *,
        num_warps: int,
        num_stages: int,
    ) -> None:
        self._interpreted = is_interpreted(kernel)
        params = None if self._interpreted else kernel.params
        names = kernel.arg_names if params is None else [p.name for p in params]
        trailing = names[len(names) - len(constants) :]
        if sorted(trailing) != sorted(constants) or (
            params is not None
            and not all(p.is_constexpr for p in params[len(names) - len(constants) :])
        ):
            raise ValueError(
                f"Launch({kernel.__name__}): the constants {sorted(constants)} must be the "
                f"kernel's trailing constexpr parameters, found {trailing}"
            )
        self.kernel = kernel
        self.grid = grid
        self.options = {"num_warps": num_warps, "num_stages": num_stages}
        self._constants = constants
        # The constants' values in signature order, passed after the runtime arguments.
        self._constant_values = tuple(constants[name] for name in trailing)
        self._compiled: dict[tuple[Any, ...], Any] = {}

    def __call__(self, tensors: tuple[torch.Tensor, ...], scalars: tuple[Any, ...]) -> None:
        """Launch with the kernel's tensor arguments, then its scalars, in signature order.

        The compiled launcher runs when every tensor is 16-byte aligned and the scalars
        were seen before (the specialization Triton compiled for them); anything else
        goes through Triton, which picks or compiles the kernel for it.
        """
        if self._interpreted:
            self.kernel[self.grid](*tensors, *scalars, **self._constants, **self.options)
            return
        aligned = not (functools.reduce(operator.or_, map(_data_ptr, tensors)) & 15)
        compiled = self._compiled.get(scalars) if aligned else None
        if compiled is None:
            kernel = self.kernel[self.grid](*tensors, *scalars, **self._constants, **self.options)
            if aligned:
                self._compiled[scalars] = kernel
            return
        stream = driver.active.get_current_stream(driver.active.get_current_device())
        enter, exit_ = _hook(knobs.runtime.launch_enter_hook), _hook(knobs.runtime.launch_exit_hook)
        args = (*tensors, *scalars, *self._constant_values)
        metadata = compiled.launch_metadata(self.grid, stream, *args) if enter else None
        gx, gy, gz = self.grid
        compiled.run(
            gx,
            gy,
            gz,
            stream,
            compiled.function,
            compiled.packed_metadata,
            metadata,
            enter,
            exit_,
            *args,
        )


_data_ptr = torch.Tensor.data_ptr


def _hook(hook: Any) -> Any:
    """A launch hook, or None where there is none to call (Triton 3.6 keeps an empty chain)."""
    return None if hook is None or getattr(hook, "calls", True) == [] else hook
