"""``vllm-template tiny-model``: write the embedded model and print its directory."""

from __future__ import annotations

import argparse
from pathlib import Path


def add_arguments(parser: argparse.ArgumentParser) -> None:
    # the presets' names (embedded_model.presets; --help needs no torch)
    sizes = ("tiny", "tiny-draft", "tiny-moe", "small")
    parser.add_argument("--size", default="tiny", choices=sizes)
    parser.add_argument("--out", type=Path, help="directory to write (default: the cache)")
    parser.add_argument(
        "--quantized",
        action="store_true",
        help="write the linear weights as W8A8 INT8 (compressed-tensors; tiny, tiny-moe)",
    )


def main(args: argparse.Namespace) -> int:
    from vllm_platform_template_tools.embedded_model import ensure_model

    print(ensure_model(args.size, args.out, quantized=args.quantized))
    return 0
