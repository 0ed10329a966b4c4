"""vllm-platform-template: an out-of-tree hardware platform plugin for vLLM (README.md).

Entry points (see pyproject.toml): :func:`register` for ``vllm.platform_plugins``
and :func:`register_general` for ``vllm.general_plugins``. Importing this
package imports neither vLLM nor torch.
"""

from vllm_platform_template.platform_hooks.entry_point import register, register_general
from vllm_platform_template.settings import PLUGIN_VERSION

__version__ = PLUGIN_VERSION

__all__ = ["__version__", "register", "register_general"]
