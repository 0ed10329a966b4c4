"""The ``vllm-template`` command line: demo, tiny-model, doctor, bench-ops, serve, new."""
