"""A simulated access node: an E2 node that reports its stations' KPIs every period."""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

import numpy as np

from core.scenario.e2_identities import GNB_IDS, OFFERED
from e2sim.kpis import NodeReport
from e2sim.node_client import ActiveSubscription, E2NodeClient
from kpm import builders
from kpm.catalogue import Scope, load_catalogue
from kpm.codec import KpmPdu
from kpm.fast_encode import encode_format3
from kpm.ueid import gnb_du_ueid
from kpm.versions import KpmVersion

RECONNECT_S = 1.0  # between attempts to set a dropped association up again

UINT32_MAX = 2**32 - 1


def _record(value: float) -> int | float:
    """Counters go out as INTEGER, everything else as REAL (as a gNB's PM counters would)."""
    return int(value) if float(value).is_integer() and 0 <= value <= UINT32_MAX else float(value)


class SimulatedNode:
    """One access's E2 node; ``positions`` are the stations' 1-based scenario positions."""

    def __init__(
        self,
        access: str,
        address: tuple[str, int],
        positions: Sequence[int],
        version: KpmVersion = KpmVersion.V3_00,
        offered: Sequence[str] | None = None,
    ) -> None:
        """``offered``: the measurements it offers in its E2 setup (default: all it can make)."""
        self.access = access
        self._offered = tuple(OFFERED[access] if offered is None else offered)
        self._address, self._version = address, version
        self.client = self._new_client()
        self._last_attempt_s = 0.0
        self.reconnects = 0
        with_mac = access != "nr"
        self._ueids = [gnb_du_ueid(p, _mac(p) if with_mac else None) for p in positions]
        catalogue = load_catalogue()
        self._cell_names = {m.name for m in catalogue.for_access(access) if m.scope == Scope.CELL}
        self.sequence = 0
        self.bytes_sent = 0

    def _new_client(self) -> E2NodeClient:
        return E2NodeClient(
            self._address, GNB_IDS[self.access], self._offered, version=self._version
        )

    def connect(self) -> None:
        self._last_attempt_s = time.monotonic()
        self.client.connect()

    def keep_connected(self) -> None:
        """A real E2 node sets its association up again when it drops (the xApp or the E2
        termination restarted): once a second, with a fresh E2 setup."""
        if self.client.connected or time.monotonic() - self._last_attempt_s < RECONNECT_S:
            return
        self.client.close()
        self.client = self._new_client()
        try:
            self.connect()
        except OSError:
            return
        self.reconnects += 1

    def close(self) -> None:
        self.client.close()

    @property
    def subscription(self) -> ActiveSubscription | None:
        return self.client.subscription

    def send(self, collect_start_unix_s: float, period_ms: int, report: NodeReport) -> bool:
        """Send one period's indication for the active subscription; False when there is none."""
        active = self.client.subscription
        if active is None:
            return False
        sender = self.client.node_name.replace("_", "-")  # PrintableString has no underscore
        header = builders.header(collect_start_unix_s, self.client.version, sender_name=sender)
        if active.style == 1:
            message = self._cell_message(active.measurements, report, period_ms)
        else:
            message = self._per_ue_message(active.measurements, report, period_ms)
        codec = self.client.codec
        header_bytes = codec.encode(KpmPdu.HEADER, header)
        # The per-UE shape has a fast writer (asn1tools' bytes, a few times sooner); anything
        # else goes through asn1tools.
        message_bytes = encode_format3(self.client.version, message) or codec.encode(
            KpmPdu.MESSAGE, message
        )
        try:
            self.client.send_encoded_indication(header_bytes, message_bytes, self.sequence % 65536)
        except (OSError, RuntimeError):  # the association ended under us; reconnect later
            return False
        self.sequence += 1
        self.bytes_sent += len(header_bytes) + len(message_bytes)
        return True

    def _per_ue_message(
        self, names: Sequence[str], report: NodeReport, period_ms: int
    ) -> dict[str, Any]:
        """Format 3. measInfoList is left out when the values follow the action definition's
        order and carry no labels (E2SM-KPM allows it): it would repeat every measName for
        every UE, and it is most of the encoding time at a thousand UEs."""
        columns = [report.values[n] for n in names]
        labelled = {n: report.labels[n] for n in names if n in report.labels}
        reports = []
        for i, ueid in enumerate(self._ueids):
            record = [
                _record(column[i]) if report.measured(name, i) else None
                for name, column in zip(names, columns, strict=True)
            ]
            body = builders.message_format1_body(names, [record], period_ms)
            if labelled:
                for j, name in enumerate(names):
                    if name in labelled:
                        body["measInfoList"][j]["labelInfoList"] = [
                            {"measLabel": {"distBinX": int(labelled[name][i])}}
                        ]
            else:
                del body["measInfoList"]
            reports.append({"ueID": ueid, "measReport": body})
        return {
            "indicationMessage-formats": (
                "indicationMessage-Format3",
                {"ueMeasReportList": reports},
            )
        }

    def _cell_message(
        self, names: Sequence[str], report: NodeReport, period_ms: int
    ) -> dict[str, Any]:
        """Cell level: cell counters as they are, per-station counters summed (throughput, PRBs)."""
        values = []
        for name in names:
            column = report.values[name]
            if name in self._cell_names:
                values.append(_record(float(column[0])) if len(column) else None)
            else:
                values.append(_record(float(np.sum(column))))
        return builders.message_format1(names, [values], period_ms)


def _mac(position: int) -> str:
    from core.scenario.e2_identities import station_mac

    return station_mac(position)
