"""A punica wrapper on the device-neutral LoRA operators (``reference_kernels/lora.py``).

vLLM hook: ``Platform.get_punica_wrapper``. vLLM's LoRA layers hand every LoRA product to
the platform's punica wrapper; vLLM's ``PunicaWrapperCPU`` keeps the batch's adapter
mapping (which slot each token and each sequence uses) and runs its torch operators,
which give a token without an adapter (slot -1) the last slot's adapter (vLLM 0.32,
``vllm/lora/ops/torch_ops``; PRs #48421 and #49656, open). This subclass keeps vLLM's
mapping and loops over slices and runs the reference operators, which leave such tokens
alone: a request without LoRA gets the base model's tokens whatever else is batched
beside it. Plain torch, so any device torch drives runs it (the CPU folder's, a
first-light device's).
"""

from __future__ import annotations

from typing import Any

import torch
from vllm.lora.punica_wrapper.punica_cpu import PunicaWrapperCPU

from vllm_platform_template.reference_kernels import lora as ops


class TemplatePunicaWrapper(PunicaWrapperCPU):
    """vLLM's torch punica wrapper with LoRA operators that skip no-adapter tokens.

    Prefill and decode differ only in how vLLM's torch ops read the mapping (per
    sequence, then repeated over its tokens; per token): both come to
    ``token_lora_indices``, the slot of each token.
    """

    def _shrink_prefill(
        self, y: torch.Tensor, x: torch.Tensor, w_t_all: torch.Tensor, scale: float
    ) -> None:
        ops.shrink(x, w_t_all, y, self.token_lora_indices, scale)

    _shrink_decode = _shrink_prefill

    def _expand_prefill(
        self, y: torch.Tensor, x: torch.Tensor, w_t_all: torch.Tensor, add_inputs: bool
    ) -> None:
        ops.expand(x, w_t_all, y, self.token_lora_indices, add=add_inputs)

    _expand_decode = _expand_prefill

    def _expand_slice_prefill(
        self,
        y: torch.Tensor,
        x: torch.Tensor,
        w_t_all: torch.Tensor,
        y_offset: int,
        y_slice_size: int,
        add_inputs: bool,
    ) -> None:
        ops.expand(x, w_t_all, y, self.token_lora_indices, y_offset, y_slice_size, add_inputs)

    _expand_slice_decode = _expand_slice_prefill

    def add_lora_logits(
        self,
        y: torch.Tensor,
        x: torch.Tensor,
        lora_a_stacked: torch.Tensor,
        lora_b_stacked: torch.Tensor,
        scale: float,
        *,
        buffer: torch.Tensor | None = None,
        **kwargs: Any,
    ) -> None:
        """``y += (x @ A^T * scale) @ B^T`` per sampled row (vLLM's semantics)."""
        y2, x2 = y.view(-1, y.shape[-1]), x.view(-1, x.shape[-1])
        if buffer is None:  # float32, as vLLM's own punica ops keep it
            buffer = torch.zeros((x2.size(0), lora_b_stacked.size(-1)), dtype=torch.float32,
                                 device=x2.device)  # fmt: skip
        ops.shrink(x2, lora_a_stacked, buffer, self.sampler_indices, scale)
        ops.expand(buffer, lora_b_stacked, y2, self.sampler_indices, add=True)

    def apply_lora_full_linear(
        self,
        y: torch.Tensor,
        x: torch.Tensor,
        weight_stacked: torch.Tensor,
        bias_stacked: torch.Tensor,
        module_enabled: torch.Tensor,
    ) -> None:
        adapter_y = torch.zeros((x.size(0), weight_stacked.size(-2)), dtype=torch.float32,
                                device=x.device)  # fmt: skip
        ops.shrink(x, weight_stacked, adapter_y, self.sampler_indices, 1.0)
        y.copy_(self._select_full_linear_output(y, adapter_y, bias_stacked, module_enabled))
