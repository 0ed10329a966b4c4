"""The template compiler: vLLM ``CompilerInterface``, pass manager and fusion passes.

``TemplateCompiler`` is imported lazily so that the front end can read
``cache_key`` without importing vLLM's compilation stack.
"""

from typing import Any

__all__ = ["TemplateCompiler"]


def __getattr__(name: str) -> Any:
    if name == "TemplateCompiler":
        from vllm_platform_template.compiler.compiler import TemplateCompiler

        return TemplateCompiler
    raise AttributeError(name)
