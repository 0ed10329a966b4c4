"""Entry point of the ``vllm-template`` command.

Each subcommand is a module imported only when it is chosen, so the command
starts with the standard library and this package: ``--help`` and a subcommand
that starts no engine need neither torch nor vLLM (``tests/shared/test_cli_imports.py``).
"""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import sys

# Each command whose module this project has (a plugin made by ``new`` has the tools it
# was given: see ``_present``).
_CLI = __package__  # this package (vllm-template runs as a script or with -m)
_ALL_COMMANDS = {
    "demo": (
        f"{_CLI}.demo",
        "generate with vLLM on the template platform",
    ),
    "tiny-model": (f"{_CLI}.tiny_model", "write the embedded model"),
    "doctor": (f"{_CLI}.doctor", "what would run here, and why"),
    "bench-ops": (f"{_CLI}.bench_ops", "time the IR op providers"),
    "serve": (
        f"{_CLI}.serve",
        "vLLM's OpenAI-compatible server on the platform",
    ),
    "new": (
        f"{_CLI}.new",
        "start a plugin for a new device from this one",
    ),
}


def _present(module_name: str) -> bool:
    return importlib.util.find_spec(module_name) is not None


COMMANDS = {name: entry for name, entry in _ALL_COMMANDS.items() if _present(entry[0])}


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The command's parser, with the arguments of ``command`` only (its module imported)."""
    parser = argparse.ArgumentParser(
        prog="vllm-template", description="vllm-platform-template: a vLLM platform plugin"
    )
    sub = parser.add_subparsers(dest="command", required=True)
    for name, (module_name, help_text) in COMMANDS.items():
        subparser = sub.add_parser(name, help=help_text)
        if name == command:
            module = importlib.import_module(module_name)
            subparser.description = module.__doc__
            module.add_arguments(subparser)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Run the command; ``argv`` None (the console script, ``python -m``): ``sys.argv``.

    Run as the process's own command (``argv`` None), a command that sets
    ``ENDS_ITS_PROCESS`` ends the process at exit without the interpreter's
    finalization once its exit handlers ran (``process_exit``): ``demo`` holds
    torch and vLLM, whose teardown took seconds after the report was printed.
    """
    command_line = argv is None
    argv = sys.argv[1:] if argv is None else argv
    command = argv[0] if argv and argv[0] in COMMANDS else None
    args = build_parser(command).parse_args(argv)
    module = importlib.import_module(COMMANDS[args.command][0])
    code = int(module.main(args) or 0)
    if command_line and getattr(module, "ENDS_ITS_PROCESS", False):
        from vllm_platform_template.process_exit import exit_after_the_exit_handlers

        exit_after_the_exit_handlers(code)
    return code


if __name__ == "__main__":
    sys.exit(main())
