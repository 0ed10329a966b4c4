"""Every Python process of the first-light engine on the CPU starts with the stand-in.

``tests/e2e/first_light_on_cpu.py`` puts this folder first on ``PYTHONPATH`` for
the processes the engine starts (vLLM inspects a model's class in a subprocess,
and may run its engine core and workers in others), so each of them points the
device folder at the CPU before it imports anything of it.
"""

import first_light_on_cpu

first_light_on_cpu.stand_in()
