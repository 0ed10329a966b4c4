"""The tools around the vllm-platform-template plugin: what vLLM never loads.

- ``cli/``: the ``vllm-template`` command (its commands: ``cli/main.py``);
- ``embedded_model/``: the tiny Llama and its tokenizer the demo and the tests
  run, written from data shipped here (no download);
- ``conformance/``, where it has it: the kit that holds an IR provider to vLLM's op
  semantics.

The plugin, ``vllm_platform_template``, is what vLLM's entry points load; it never
imports this package (``tests/shared/test_import_graph.py`` checks), and this package
imports the plugin as any user of it would.
"""
