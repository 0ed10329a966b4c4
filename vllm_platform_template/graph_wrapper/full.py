"""``TemplateFullGraphWrapper``: whole-step (FULL) graphs of vLLM's V1 model runner.

vLLM hook served: none exists - the V1 runner wraps the model in vLLM's
``CUDAGraphWrapper`` (``torch.cuda.CUDAGraph`` by name, compiled ``weak_ref_tensor``).
Where the graph API is ``torch.accelerator.Graph`` the patch registry's
``v1_full_graphs_through_the_device`` puts this class in its place:
``TemplateGraphWrapper`` counted as FULL graphs, with what the runner asks of its
wrapper class (``_all_instances``, ``clear_all_graphs()``, a settable ``graph_pool``).
Proven by ``test_full_graph_wrapper.py`` and an engine on the PrivateUse1 test device
(``test_scaffold.py``'s speed-tier test: FULL replays counted from the runner).
"""

from __future__ import annotations

import weakref
from collections.abc import Callable
from typing import Any, ClassVar

from vllm.compilation.cuda_graph import CUDAGraphOptions
from vllm.config import CUDAGraphMode, VllmConfig

from vllm_platform_template.device import GraphBackend
from vllm_platform_template.graph_wrapper.stats import FULL_STATS, GraphStats
from vllm_platform_template.graph_wrapper.wrapper import TemplateGraphWrapper


class TemplateFullGraphWrapper(TemplateGraphWrapper):
    """The whole model, one graph per decode batch descriptor, in vLLM's V1 runner."""

    stats: GraphStats = FULL_STATS
    _all_instances: ClassVar[weakref.WeakSet[TemplateFullGraphWrapper]] = weakref.WeakSet()

    def __init__(
        self,
        runnable: Callable[..., Any],
        vllm_config: VllmConfig,
        runtime_mode: CUDAGraphMode,
        cudagraph_options: CUDAGraphOptions | None = None,
        backend: GraphBackend | None = None,
    ) -> None:
        super().__init__(runnable, vllm_config, runtime_mode, cudagraph_options, backend)
        TemplateFullGraphWrapper._all_instances.add(self)

    @classmethod
    def clear_all_graphs(cls) -> None:
        """Drop every instance's graphs (the runner does before it recaptures)."""
        for instance in list(cls._all_instances):
            instance.clear_graphs()

    @property
    def graph_pool(self) -> Any:
        """The memory pool the next captures allocate from (the backend's)."""
        return self.backend.pool

    @graph_pool.setter
    def graph_pool(self, pool: Any) -> None:
        self.backend.pool = pool
