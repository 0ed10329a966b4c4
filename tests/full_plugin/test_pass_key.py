"""The pass manager travels under a key every compiler accepts.

vLLM puts the platform's pass manager into the compiler config under
``Platform.pass_key`` whatever compiler runs; when a user names vLLM's own
``inductor`` backend, that config goes to Inductor, which rejects keys it does
not know. vLLM's own test_aot_compile.py (in its compile tests) found a key of the
template's own failing there.
"""

from __future__ import annotations

import torch._inductor.config as inductor_config

from vllm_platform_template.devices.cpu.platform import TemplateCpuPlatform
from vllm_platform_template.settings import INDUCTOR_POST_PASS_KEY


def test_the_pass_key_is_one_inductor_accepts() -> None:
    key = TemplateCpuPlatform().pass_key
    assert key == INDUCTOR_POST_PASS_KEY
    with inductor_config.patch({key: None}):
        assert getattr(inductor_config, key) is None
