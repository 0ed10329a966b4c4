"""Sizes of the embedded models (Llama architecture; Mixtral where a preset has experts)."""

from __future__ import annotations

from dataclasses import dataclass, replace


@dataclass(frozen=True)
class ModelPreset:
    """Shape of one embedded model; every field maps onto a ``LlamaConfig`` key (with
    experts, a ``MixtralConfig``: ``intermediate_size`` is then each expert's)."""

    name: str
    hidden_size: int
    intermediate_size: int
    num_hidden_layers: int
    num_attention_heads: int
    num_key_value_heads: int
    vocab_size: int
    max_position_embeddings: int
    dtype: str  # the checkpoint dtype written to config.json
    num_local_experts: int = 0
    """Experts per layer (0: a dense Llama MLP)."""
    num_experts_per_tok: int = 0
    """Experts each token is routed to (top-k)."""

    @property
    def is_moe(self) -> bool:
        return self.num_local_experts > 0

    @property
    def head_dim(self) -> int:
        return self.hidden_size // self.num_attention_heads

    def num_parameters(self) -> int:
        """Parameter count of the Llama model with these dimensions (untied head)."""
        h, kv = self.hidden_size, self.num_key_value_heads * self.head_dim
        attn = 2 * h * h + 2 * h * kv
        mlp = 3 * h * self.intermediate_size * max(1, self.num_local_experts)
        mlp += h * self.num_local_experts  # the router
        per_layer = attn + mlp + 2 * h
        return self.num_hidden_layers * per_layer + 2 * self.vocab_size * h + h


# The demo's and the tests' model: two layers, grouped-query attention, fp32 so that
# stock vLLM, the plugin and transformers agree token for token; its weights are trained
# on Austen's novels (trained.py).
TINY = ModelPreset(
    name="tiny",
    hidden_size=256,
    intermediate_size=512,
    num_hidden_layers=2,
    num_attention_heads=4,
    num_key_value_heads=2,
    vocab_size=2048,
    max_position_embeddings=1024,
    dtype="float32",
)

PRESETS: dict[str, ModelPreset] = {
    "tiny": TINY,
    # The draft model for speculative decoding: tiny's first layer, its embeddings, final
    # norm and LM head (trained.py takes them from tiny's weights); tiny's tokenizer.
    "tiny-draft": replace(TINY, name="tiny-draft", num_hidden_layers=1),
    # The mixture-of-experts model (Mixtral architecture): tiny's tokenizer, four experts
    # per layer, each token routed to two; small enough to commit (about 2 MiB as fp16),
    # trained on the same text as tiny (trained.py).
    "tiny-moe": ModelPreset(
        name="tiny-moe",
        hidden_size=128,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=2,
        num_key_value_heads=1,
        vocab_size=2048,
        max_position_embeddings=1024,
        dtype="float32",
        num_local_experts=4,
        num_experts_per_tok=2,
    ),
    # For benchmarks and bf16 tests: about 100M parameters, bf16 checkpoint, seeded
    # random weights (weights.py).
    "small": ModelPreset(
        name="small",
        hidden_size=768,
        intermediate_size=2048,
        num_hidden_layers=12,
        num_attention_heads=12,
        num_key_value_heads=4,
        vocab_size=16384,
        max_position_embeddings=2048,
        dtype="bfloat16",
    ),
}
