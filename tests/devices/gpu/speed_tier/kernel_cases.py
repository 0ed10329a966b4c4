"""The shapes and dtypes the Triton kernels are tested and warmed up at, in one place.

``test_triton_kernels.py`` (on the device) parametrizes over these tables and
``aot_compile.py`` (on any CPU) compiles every kernel for the device's
architecture at the same cases, plus the attention layouts an engine's warm-up
compiles (:data:`ENGINE_ATTENTION_LAYOUTS`): a kernel that does not compile for
the device fails in CI, before it meets a GPU.
"""

from __future__ import annotations

import torch

DTYPES = (torch.float32, torch.bfloat16, torch.float16)

# Row ops (rms_norm, fused_add_rms_norm): [tokens, hidden].
ROW_SHAPES = ((1, 128), (7, 1000), (128, 4096), (33, 5120), (4096, 4096), (8192, 8192), (3, 70000))
SILU_SHAPES = ((1, 2 * 64), (37, 2 * 1000), (4096, 2 * 14336), (3, 5, 2 * 4096))
GELU_SHAPES = ((4, 2 * 96), (512, 2 * 8192), (3, 2 * 40000))
GELU_APPROXIMATIONS = ("none", "tanh")

# Rotary: (query heads, KV heads, head size, rotary dims).
ROTARY_HEADS = ((32, 8, 128, 128), (16, 16, 64, 32), (40, 8, 80, 80))

# Paged attention: (query heads, KV heads, head size); (query lengths, sequence lengths).
ATTENTION_HEADS = ((32, 8, 128), (8, 8, 64), (12, 2, 96))
BLOCK_SIZES = (16, 32)
ATTENTION_BATCHES = {
    "prefill": ((1000, 512, 37), (1000, 1536, 37)),
    "mixed": ((1, 300, 1, 1, 17, 1), (4096, 700, 1, 2049, 17, 33)),
    "decode": ((1,) * 32, tuple(64 + 127 * i for i in range(32))),
    "decode_long": ((1, 1), (4096, 3001)),
    "single_request": ((77,), (200,)),
}
FORCED_DECODE_SPLITS = (1, 7)
# The prefill kernel's tiles (block_m, block_n, num_warps, num_stages) under trial on the
# GPU (benchmarks/gpu_prefill_kernel.py sweeps them), each compiled for bf16; fp32 and fp16
# at the first.
PREFILL_TILES = (
    (64, 32, 4, 2),
    (64, 64, 4, 2),
    (64, 64, 4, 3),
    (128, 32, 4, 2),
    (128, 64, 4, 2),
    (128, 64, 8, 2),
    (128, 64, 8, 3),
    (128, 128, 8, 2),
)

# The attention layouts engines plan and warm up (TritonAttentionPlanner.warm_up):
# (query heads, KV heads, head size, block size, max requests a step) - the embedded
# tiny model, the benchmarks' Llama 1.1B and 8B / Mixtral shapes, the tests' graph
# capture - in every dtype an engine serves.
ENGINE_ATTENTION_LAYOUTS = (
    (2, 1, 64, 16, 256),
    (2, 1, 64, 16, 1024),
    (32, 8, 64, 16, 1024),
    (32, 8, 128, 16, 1024),
    (32, 8, 128, 16, 8),
)

# W8A8 INT8 linear: (tokens, in features, out features); the tests' shape, then the
# embedded tiny model's and Llama-3.1-8B's projections.
INT8_LINEAR_TOKENS = (1, 32, 300)
INT8_LINEAR_SHAPES = (
    (4096, 1536),
    (128, 384),
    (4096, 6144),
    (4096, 4096),
    (4096, 28672),
    (14336, 4096),
)
INT8_DTYPES = (torch.bfloat16, torch.float32)

# Mixture of experts: (experts, hidden, intermediate, top-k) - the tests' cut of Mixtral,
# Mixtral-8x7B's layer and the embedded tiny-moe; tokens from decode to prefill.
MOE_SHAPES = ((8, 1024, 512, 2), (8, 4096, 14336, 2), (4, 128, 128, 2))
MOE_TOKENS = (1, 32, 512)
MOE_DTYPES = (torch.bfloat16, torch.float32)
