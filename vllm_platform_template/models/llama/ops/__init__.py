"""The fused ops the template Llama calls at its call sites (see ``fused_ops``)."""
