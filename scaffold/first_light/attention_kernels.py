"""The device's paged-attention kernels: first light's are the reference (plain torch).

vLLM hook served: the attention kernels behind ``Platform.get_attn_backend_cls``
(``TEMPLATE_ATTN``'s impl and metadata builder, ``attention/``, run them on the
device). First light runs ``vllm_platform_template/reference_kernels/paged_attention/reference.py``
(causal paged attention over mixed prefill/decode batches, grouped-query heads,
fp32 math) on any device. Speed (docs/porting-guide.md, "11. Attention
kernels"): override ``write_kv`` and ``attend`` with your kernels (and
``planner`` for what a step's shape fixes), keeping the cache layout and the
argument contract (``reference_kernels/paged_attention/contract.py``), and ``name``, which
the engine reports as the attention path; ``full_graphs`` stays False until a
captured decode step replays right for other lengths. Proven by
``tests/shared/test_attention_backend.py`` and
``tests/devices/gpu/test_gpu_first_light.py``.
"""

from __future__ import annotations

from vllm_platform_template.reference_kernels.paged_attention.reference import (
    ReferenceAttentionKernels,
)


class DeviceAttentionKernels(ReferenceAttentionKernels):
    """The reference paged attention, until the device's kernels replace its methods."""
