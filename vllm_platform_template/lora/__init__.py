"""LoRA on the template platforms: the punica wrapper vLLM's LoRA layers call.

vLLM hook: ``Platform.get_punica_wrapper`` (the class path each device folder names in
``device.py``, ``TemplateDevice.punica_wrapper``; a folder that names none refuses
``enable_lora`` when vLLM checks the config, saying what to implement).
"""
