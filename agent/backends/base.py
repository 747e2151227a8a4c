"""The interface every kernel backend implements."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from ipaddress import IPv4Address
from typing import Protocol


class BackendError(RuntimeError):
    """The kernel refused a write or its state could not be read; nothing is assumed applied."""


@dataclass(frozen=True)
class PathWeight:
    """One access of one CPE: the CPE's address on it and the weight (0 = standby)."""

    cpe_id: str
    access: str
    cpe_address: IPv4Address
    weight: int


KernelState = Mapping[tuple[str, str], int]  # (cpe_id, access) → weight the kernel holds


class Backend(Protocol):
    name: str
    # "weights": the kernel schedules by integer weights; "active-backup": only a path's backup
    # flag can be set, so every active path is left to the kernel's own scheduler.
    lever: str
    # Whether what this side sets also steers what the peer sends (mainline: MP_PRIO).
    steers_peer: bool

    def read(self, paths: list[PathWeight]) -> KernelState:
        """What the kernel holds now for these paths (weights of the paths' addresses)."""
        ...

    def write(self, paths: list[PathWeight]) -> None:
        """Make the kernel hold exactly these weights; raises BackendError."""
        ...

    def describe(self) -> dict[str, object]:
        """The raw kernel state, for `atsss agent show`."""
        ...
