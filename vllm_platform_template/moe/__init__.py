"""Mixture-of-experts layers on the template platforms: fp experts (``fused_moe_method.py``)
and W8A8 INT8 experts (``int8_fused_moe_method.py``)."""
