"""FX fusion passes of the template, run by ``TemplatePassManager`` on each piece.

Each pass works on the functional post-AOTAutograd graph of one piece (aten
ops plus ``torch.ops.vllm_ir.*`` nodes, ``meta["val"]`` present).
"""
