"""The template's part of vLLM's compile-cache key.

vLLM keys its AOT compile cache (``torch_aot_compile/<hash>``) on
``vllm_config.compute_hash()``, which does not include the compiler's own
``compute_hash()``: with the key alone, a graph-stage run would silently load
pieces that a fusion-only run cached. The platform therefore writes
:func:`compile_cache_key` into ``additional_config`` (which vLLM hashes), and
the compiler's ``compute_hash`` returns it as well.

The key covers the plugin version, the stage, and the source of every module
that shapes compiled output (compiler, passes, kernels, IR providers, ops).
It reads files instead of importing them, so the front end pays no import cost.
"""

from __future__ import annotations

import functools
import hashlib
from pathlib import Path

import vllm_platform_template

PACKAGE_DIR = Path(vllm_platform_template.__file__).parent
KEY_SOURCES = ("compiler", "kernels", "ir_impls", "custom_ops", "platform_plugin")
ADDITIONAL_CONFIG_KEY = "template_compile_key"


@functools.cache
def _sources_digest() -> str:
    digest = hashlib.sha256()
    for sub in KEY_SOURCES:
        for path in sorted((PACKAGE_DIR / sub).rglob("*.py")):
            digest.update(str(path.relative_to(PACKAGE_DIR)).encode())
            digest.update(path.read_bytes())
    return digest.hexdigest()


def compile_cache_key(stage: str) -> str:
    """Hash of plugin version, compile stage and the sources that shape compiled code."""
    parts = (vllm_platform_template.__version__, stage, _sources_digest())
    return hashlib.sha256("|".join(parts).encode()).hexdigest()[:16]
