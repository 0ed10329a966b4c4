"""``python -m npu_test_device build``: compile the test device's library (cached)."""

import sys

from npu_test_device import main

sys.exit(main(sys.argv[1:]))
