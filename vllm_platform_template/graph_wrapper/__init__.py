"""Piecewise static graphs: the graph wrapper and its counters (backends: per device).

vLLM hooks: ``Platform.get_static_graph_wrapper_cls`` (the wrapper class vLLM
puts around every compiled piece) and ``Platform.support_static_graph_mode``.
The graph backends are ``devices/<name>/graphs.py``; the CPU reference
backend's worker has its own capture driver (``graph_capture.py`` in its folder).
"""
