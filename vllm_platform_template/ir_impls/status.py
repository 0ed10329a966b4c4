"""Whether each template provider can run here, and why (for ``doctor``)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class ProviderStatus:
    supported: bool
    reason: str


PROVIDER_STATUS: dict[str, ProviderStatus] = {}
