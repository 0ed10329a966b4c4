"""Triton kernels launched through their compiled form: the JIT's per-call work done once.

``kernel[grid](*args)`` binds every argument, derives its specialization
(dtype, 16-byte alignment of each pointer, ``== 1`` / ``% 16`` of each
integer) and hashes it into a cache key on every call: tens of microseconds of
host time per launch, paid by every layer of every eager or piecewise step.
:class:`Launch` is one kernel at one grid with fixed compile-time constants,
made once per batch shape by the attention planner. Its first call goes through
Triton (compiling if needed) and keeps the compiled kernel under a key of the
call's own specialization-relevant values (each pointer's alignment, each
integer); later calls with the same key call the compiled launcher directly.
A call whose key is new (another stride, an unaligned view) goes through
Triton again, so the shortcut never runs a kernel compiled for other inputs.

Under Triton's interpreter (``TRITON_INTERPRET=1``, the CPU tests) every call
goes through the interpreter. The compiled launcher's calling convention
(``CompiledKernel.run(gx, gy, gz, stream, function, packed_metadata,
launch_metadata, enter_hook, exit_hook, *args)``, every signature argument in
order) is Triton's own ``JITFunction.run``; it is the same in Triton 3.6 and
3.9 (``tests/gpu/test_triton_kernels.py`` launches through it on the device).

vLLM hook served: none directly; the attention kernels of ``TEMPLATE_ATTN``
(``attention_kernels.py``) launch through it.
"""

from __future__ import annotations

from typing import Any

import torch
from triton import knobs
from triton.runtime.driver import driver

from vllm_platform_template.devices.gpu.kernels import is_interpreted


class Launch:
    """One Triton kernel at one grid with its compile-time constants bound."""

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

    def __call__(self, *args: Any) -> None:
        """Launch with the kernel's runtime arguments, in signature order."""
        if self._interpreted:
            self.kernel[self.grid](*args, **self._constants, **self.options)
            return
        key = tuple(a.data_ptr() & 15 if isinstance(a, torch.Tensor) else a for a in args)
        compiled = self._compiled.get(key)
        if compiled is None:
            self._compiled[key] = self.kernel[self.grid](*args, **self._constants, **self.options)
            return
        constants = self._constant_values
        device = driver.active.get_current_device()
        stream = driver.active.get_current_stream(device)
        enter, exit_ = knobs.runtime.launch_enter_hook, knobs.runtime.launch_exit_hook
        metadata = None
        if enter is not None:
            metadata = compiled.launch_metadata(self.grid, stream, *args, *constants)
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
            *constants,
        )
