"""The ``vllm-template`` command line: its subcommands are ``main.COMMANDS``."""
