"""The embedded models: two Llama presets the project writes itself.

No model can be downloaded where this template is tested, so the demo, the
tests and the benchmarks use a model the project generates itself
(``writer.ensure_model``):

- ``tiny`` (2.2M parameters, fp32): weights and tokenizer trained on Jane
  Austen's novels and committed under ``trained/`` (``trained.py``,
  ``text_data.py``);
- ``small`` (about 100M parameters, bf16, for speed work): seeded random
  weights (``weights.py``) and a tokenizer trained at write time on a
  pseudo-word corpus (``corpus.py``).
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
