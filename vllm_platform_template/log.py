"""Loggers of the plugin, routed through vLLM's logging configuration.

vLLM configures handlers and format on its ``vllm`` logger; naming ours
``vllm.template.<module>`` makes them children of it, so plugin messages carry
vLLM's format, level (``VLLM_LOGGING_LEVEL``) and process name.

:func:`quiet_vllm_messages` keeps a few of vLLM's own messages out of the log
on a template platform, each listed with why (each platform's
``QUIETED_VLLM_MESSAGES``).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

from vllm.logger import init_logger


def get_logger(module_name: str):  # -> vllm.logger._VllmLogger
    """A vLLM logger for ``module_name`` (pass ``__name__``)."""
    short = module_name.removeprefix("vllm_platform_template.")
    return init_logger(f"vllm.template.{short}")


@dataclass(frozen=True)
class QuietedMessage:
    """One message of vLLM that a template platform keeps out of the log, and why.

    Only messages that are false or beside the point on that platform belong
    here, matched exactly: the logger, the format string as vLLM writes it and,
    where given, the arguments. The unit tier checks each format string still
    occurs in the installed vLLM's source.
    """

    logger: str
    message: str
    why: str
    args: tuple[Any, ...] | None = None  # None: whatever the arguments

    def matches(self, record: logging.LogRecord) -> bool:
        if record.msg != self.message:
            return False
        return self.args is None or tuple(record.args or ()) == self.args


class _DropQuieted(logging.Filter):
    def __init__(self, messages: tuple[QuietedMessage, ...]) -> None:
        super().__init__()
        self.messages = messages

    def filter(self, record: logging.LogRecord) -> bool:
        return not any(message.matches(record) for message in self.messages)


def quiet_vllm_messages(messages: tuple[QuietedMessage, ...]) -> None:
    """Drop ``messages`` at their vLLM loggers in this process (idempotent).

    A filter on the logger itself, so a message is dropped whether or not
    vLLM's handlers are configured yet (some are logged while vLLM imports).
    """
    for name in sorted({m.logger for m in messages}):
        target = logging.getLogger(name)
        if any(isinstance(f, _DropQuieted) for f in target.filters):
            continue
        target.addFilter(_DropQuieted(tuple(m for m in messages if m.logger == name)))
