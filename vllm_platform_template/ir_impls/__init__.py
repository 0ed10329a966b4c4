"""vLLM IR providers of the template (registration glue; kernels live in ``kernels``)."""
