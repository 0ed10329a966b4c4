"""Piecewise static graphs: the graph wrapper and the capture driver (backends: per device).

vLLM hooks: ``Platform.get_static_graph_wrapper_cls`` (the wrapper class vLLM
puts around every compiled piece) and ``Platform.support_static_graph_mode``.
"""
