"""Llama with the template device's hand-fused ops (model, kernels and tests together)."""
