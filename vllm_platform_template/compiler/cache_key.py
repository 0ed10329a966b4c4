"""The template's part of vLLM's compile-cache key.

vLLM keys its AOT compile cache (``torch_aot_compile/<hash>``) on
``vllm_config.compute_hash()``, which does not include the compiler's own
``compute_hash()``: with the key alone, a graph-stage run would silently load
pieces that a fusion-only run cached. The platform therefore writes
:func:`compile_cache_key` into ``additional_config`` (which vLLM hashes), and
the compiler's ``compute_hash`` returns it as well.

It is the plugin's one compile fingerprint: the pass manager's ``uuid`` (the
Inductor/AOTAutograd cache key part) uses it too. It covers the plugin
version, the stage, and the source of every module of the plugin package: a
hand-kept list of the modules that shape compiled output goes stale as the
package is reorganised (one did: it named a folder that had been renamed, so
edits to the reference kernels kept old compiled pieces). It reads files
instead of importing them, so the front end pays no import cost.
"""

from __future__ import annotations

import functools
import hashlib
from pathlib import Path

from vllm_platform_template.settings import PLUGIN_VERSION

PACKAGE_DIR = Path(__file__).resolve().parent.parent


@functools.cache
def _sources_digest() -> str:
    digest = hashlib.sha256()
    for path in sorted(PACKAGE_DIR.rglob("*.py")):
        digest.update(str(path.relative_to(PACKAGE_DIR)).encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()


def compile_cache_key(stage: str) -> str:
    """Hash of plugin version, compile stage and the sources that shape compiled code."""
    parts = (PLUGIN_VERSION, stage, _sources_digest())
    return hashlib.sha256("|".join(parts).encode()).hexdigest()[:16]
