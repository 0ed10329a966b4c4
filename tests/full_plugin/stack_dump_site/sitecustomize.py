"""Every Python process of a stress run prints all its threads' stacks on SIGUSR1.

``tests/full_plugin/test_shutdown_stress.py`` puts this folder on ``PYTHONPATH`` for the
demo it runs (and so for vLLM's engine core and worker processes); when an
engine process outlives SIGTERM, the test sends it SIGUSR1 and the stacks land in
the run's stderr, in the failure message. faulthandler's handler is C code: it
dumps even while the main thread is blocked in a C call.
"""

import faulthandler
import signal
import sys

faulthandler.register(signal.SIGUSR1, file=sys.stderr, all_threads=True)
