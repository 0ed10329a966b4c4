"""Mixture-of-experts layers on the template platforms (``fused_moe_method.py``)."""
