"""The embedded model: a deterministic Llama with a locally trained tokenizer.

No model can be downloaded where this template is tested, so the demo, the
tests and the benchmarks use a model the project generates itself.
"""

from .presets import PRESETS, ModelPreset
from .writer import default_cache_dir, ensure_model, is_complete, write_model

__all__ = [
    "PRESETS",
    "ModelPreset",
    "default_cache_dir",
    "ensure_model",
    "is_complete",
    "write_model",
]
