"""Llama with the template device's hand-fused ops (the model and its kernels)."""
