"""Records what it would write; for trying the agent anywhere and for tests of the service."""

from __future__ import annotations

from agent.backends.base import BackendError, KernelState, PathWeight

KEPT_WRITES = 1000


class DryRunBackend:
    name = "dry-run"
    lever = "weights"
    steers_peer = False

    def __init__(self, fail_writes: int = 0) -> None:
        self.held: dict[tuple[str, str], int] = {}
        self.writes: list[list[PathWeight]] = []
        self.fail_writes = fail_writes  # test hook: refuse the next N writes, as a kernel might

    def write(self, paths: list[PathWeight]) -> None:
        if self.fail_writes > 0:
            self.fail_writes -= 1
            raise BackendError("dry-run backend told to refuse this write")
        self.writes.append(list(paths))
        if len(self.writes) > KEPT_WRITES:  # a proxy for a fleet writes all day: keep the latest
            del self.writes[:-KEPT_WRITES]
        for path in paths:
            self.held[(path.cpe_id, path.access)] = path.weight

    def read(self, paths: list[PathWeight]) -> KernelState:
        wanted = {(p.cpe_id, p.access) for p in paths}  # once: a proxy's table has thousands
        return {k: v for k, v in self.held.items() if k in wanted}

    def describe(self) -> dict[str, object]:
        return {
            "backend": self.name,
            "held": [
                {"cpe_id": c, "access": a, "weight": w} for (c, a), w in sorted(self.held.items())
            ],
        }
