"""Whether each template provider can run here, and why (for ``doctor``)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class ProviderStatus:
    supported: bool
    reason: str
    device: str  # the torch device type its kernels run on


PROVIDER_STATUS: dict[str, ProviderStatus] = {}
