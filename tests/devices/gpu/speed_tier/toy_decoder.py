"""A 16-layer toy decoder split like vLLM splits a model for piecewise graphs.

Piece 0 is layer 0 up to attention; piece i (1..L-1) is the rest of layer
i-1 plus layer i up to attention; piece L is the rest of the last layer. Each
piece writes attention's output buffer; attention runs eagerly between pieces
and fills that buffer in place (as ``vllm::unified_attention_with_output``
does), so a captured piece reads and writes the same addresses every step.

Used by ``test_device_graphs.py`` (and the graph benchmark); no vLLM.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch
import torch.nn.functional as F

from vllm_platform_template.device import CapturedGraph, GraphBackend
from vllm_platform_template.devices.gpu.identity import IDENTITY


@dataclass
class ToyConfig:
    layers: int = 16
    hidden: int = 1024
    heads: int = 8
    intermediate: int = 2816
    context: int = 256
    dtype: torch.dtype = torch.bfloat16
    device: str = IDENTITY.device_type


class ToyDecoder:
    def __init__(self, config: ToyConfig, seed: int = 0) -> None:
        self.c = config
        g = torch.Generator(device="cpu").manual_seed(seed)
        h, i = config.hidden, config.intermediate

        def w(*shape: int) -> torch.Tensor:
            t = torch.randn(*shape, generator=g) / shape[0] ** 0.5
            return t.to(config.dtype).to(config.device)

        self.layers = [
            {
                "norm1": 1 + 0.1 * w(h),
                "wqkv": w(h, 3 * h),
                "wo": w(h, h),
                "norm2": 1 + 0.1 * w(h),
                "w_gate_up": w(h, 2 * i),
                "w_down": w(i, h),
                "k": w(config.heads, config.context, h // config.heads),
                "v": w(config.heads, config.context, h // config.heads),
            }
            for _ in range(config.layers)
        ]
        self.final_norm = 1 + 0.1 * w(h)

    @staticmethod
    def _rms(x: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
        xf = x.float()
        return (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + 1e-5)).to(x.dtype) * weight

    def _pre_attention(self, layer: dict, residual: torch.Tensor):
        x = self._rms(residual, layer["norm1"])
        q = (x @ layer["wqkv"])[:, : self.c.hidden]  # k/v come from the fixed context
        return residual, q, torch.empty_like(q)

    def _post_attention(self, layer: dict, residual: torch.Tensor, attn: torch.Tensor):
        residual = residual + attn @ layer["wo"]
        x = self._rms(residual, layer["norm2"])
        gate, up = (x @ layer["w_gate_up"]).chunk(2, dim=-1)
        return residual + (F.silu(gate) * up) @ layer["w_down"]

    def pieces(self) -> list[Callable[..., tuple]]:
        """Piece callables: ``piece(residual, attn_out_or_None) -> outputs``."""
        layers = self.layers

        def first(residual: torch.Tensor, _: torch.Tensor | None = None):
            return self._pre_attention(layers[0], residual)

        def middle(index: int):
            def piece(residual: torch.Tensor, attn: torch.Tensor):
                residual = self._post_attention(layers[index - 1], residual, attn)
                return self._pre_attention(layers[index], residual)

            return piece

        def last(residual: torch.Tensor, attn: torch.Tensor):
            return (self._rms(self._post_attention(layers[-1], residual, attn), self.final_norm),)

        return [first, *[middle(i) for i in range(1, len(layers))], last]

    def attention(self, index: int, q: torch.Tensor, out: torch.Tensor) -> None:
        """Eager attention of ``q`` ``[B, H*D]`` over layer ``index``'s context, into ``out``."""
        layer, heads = self.layers[index], self.c.heads
        qh = q.view(q.shape[0], heads, -1).transpose(0, 1).unsqueeze(0)  # [1, H, B, D]
        o = F.scaled_dot_product_attention(qh, layer["k"].unsqueeze(0), layer["v"].unsqueeze(0))
        out.copy_(o.squeeze(0).transpose(0, 1).reshape(q.shape))

    def eager_step(self, x: torch.Tensor) -> torch.Tensor:
        residual, q, buf = self.pieces()[0](x)
        for i, piece in enumerate(self.pieces()[1:], start=0):
            self.attention(i, q, buf)
            outputs = piece(residual, buf)
            if len(outputs) == 1:
                return outputs[0]
            residual, q, buf = outputs
        raise AssertionError("unreachable")


class PiecewiseGraphs:
    """Captures every piece once per batch size through a graph backend, replays after."""

    def __init__(self, model: ToyDecoder, backend: GraphBackend) -> None:
        self.model, self.backend = model, backend
        self.pieces = model.pieces()
        self.graphs: dict[int, list[CapturedGraph]] = {}
        self.inputs: dict[int, torch.Tensor] = {}

    def capture(self, batch: int) -> None:
        x = torch.zeros(
            batch, self.model.c.hidden, dtype=self.model.c.dtype, device=self.model.c.device
        )
        self.inputs[batch] = x
        graphs: list[CapturedGraph] = []
        outputs: tuple = (x,)
        for i, piece in enumerate(self.pieces):
            args = (outputs[0], outputs[2] if len(outputs) == 3 else None)
            piece(*args)  # warm-up run, as vLLM does before each capture
            graph = self.backend.capture(lambda piece=piece, args=args: piece(*args))
            graphs.append(graph)
            outputs = graph.output
            if i < len(self.pieces) - 1:
                self.model.attention(i, outputs[1], outputs[2])
        self.graphs[batch] = graphs

    def step(self, x: torch.Tensor) -> torch.Tensor:
        batch = x.shape[0]
        self.inputs[batch].copy_(x)  # the runner's persistent input buffer
        graphs = self.graphs[batch]
        for i, graph in enumerate(graphs):
            self.backend.replay(graph)
            if i < len(graphs) - 1:
                self.model.attention(i, graph.output[1], graph.output[2])
        return graphs[-1].output[0]
