"""``vllm-template tiny-model``: write the embedded model and print its directory."""

from __future__ import annotations

import argparse
from pathlib import Path


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--size", default="tiny", choices=("tiny", "small"))
    parser.add_argument("--out", type=Path, help="directory to write (default: the cache)")


def main(args: argparse.Namespace) -> int:
    from vllm_platform_template_tools.embedded_model import ensure_model

    print(ensure_model(args.size, args.out))
    return 0
