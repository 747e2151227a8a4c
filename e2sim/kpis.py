"""The KPIs each access node reports, consistent with the true capacities of its stations.

Vectorised over the stations of one node for one reporting period. Two ways in:

- a scenario that gives capacities: the radio state is inferred from each capacity through the
  radio model (the lowest CQI or HE MCS that reaches it, the PRB or airtime share that makes
  it exact, the LiFi SNR whose rate it is), so CQI, MCS, SINR, PHY rate and shares agree with
  the capacity the evaluation uses as truth;
- a scenario that gives radio conditions (SINR, distance, cell load): the radio model gives the
  capacity (see world.py), and the same functions then report it.

``utilisation`` is what each station carried over its capacity: one number for all (1.0 for a
saturating transfer) or one per station (the closed-loop evaluator, where the weights decide);
``utilisation_ul`` the same for the uplink where it differs (default: the same). NR reports
PRBs per direction (the uplink's share of its carrier follows from the uplink capacity); the
Wi-Fi airtime is the downlink's.
Cell-level values (PRB utilisation, channel busy share) sum over the stations of a cell: by
default all stations share one cell; ``cells`` gives each station's cell index otherwise. With
``outside_load`` the part of the carrier or channel a station's capacity leaves out (1 − its
PRB or airtime share) is reported as used by stations outside the simulation, as it is when a
station with one cell to itself (the closed-loop evaluator) has less than the whole carrier.

Reported values carry measurement noise (throughput ±2 %, SINR/SNR ±1 dB, RSSI ±2 dB) and the
quantisation of the real counters (integer CQI, MCS, PRBs, kbit/s). Throughput is what the
station carried: the capacity times its utilisation (1.0 for a saturating transfer).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
import numpy.typing as npt

from core.scenario.model import Scenario
from core.scenario.truth import sample_series
from core.standards import nr as nr_standard
from e2sim.nonideal import (
    NonIdealities,
    RadioLag,
    prb_fraction,
    station_factors,
    wifi_efficiency,
)
from e2sim.radio import lifi, nr, wifi

FloatArray = npt.NDArray[np.floating[Any]]


@dataclass(frozen=True)
class NodeReport:
    """One period's values per station (arrays aligned with the node's station list).

    ``values`` hold what the models compute for every station (the training datasets use them
    all); ``unmeasured`` marks the stations whose link is down, for which a real node has no
    radio measurement at all: over E2 their ``radio_names`` go out as noValue, and only what
    they carried (nothing), cell counters and a link state remain. ``served_names`` are per-UE
    counters a node keeps only for a UE it serves (the PRBs it used): noValue too for a station
    whose link is down, but not radio measurements (never reported late, nonideal.RadioLag)."""

    values: dict[str, FloatArray]
    labels: dict[str, npt.NDArray[np.int64]]  # distBinX per station for distribution names
    unmeasured: npt.NDArray[np.bool_] | None = None
    radio_names: frozenset[str] = frozenset()
    served_names: frozenset[str] = frozenset()

    def measured(self, name: str, station: int) -> bool:
        return not (
            (name in self.radio_names or name in self.served_names)
            and self.unmeasured is not None
            and bool(self.unmeasured[station])
        )


# Per-station radio measurements: a node has none of them for a station whose link is down.
NR_RADIO_NAMES = frozenset(
    {
        "CARR.AverageLayersDl",
        "CARR.WBCQIDist",
        "CARR.PDSCHMCSDist",
        "DRB.RlcSduDelayDl",
        "L1M.SS-SINR",
        "L1M.SS-RSRP",
    }
)
# The PRBs a UE used: a gNB counts them only for a UE it serves. A UE whose link is down has
# none, which is not the 0 of a UE that was served and sent nothing.
NR_SERVED_NAMES = frozenset({"RRU.PrbUsedDl", "RRU.PrbUsedUl"})
WIFI_RADIO_NAMES = frozenset(
    {
        "WLAN.StaRssi",
        "WLAN.StaSnr",
        "WLAN.StaMcsDl",
        "WLAN.StaNssDl",
        "WLAN.StaPhyRateDl",
        "WLAN.StaPhyRateUl",
        "WLAN.StaRetryRate",
    }
)


Utilisation = float | FloatArray
IDEAL = NonIdealities()


def _cell_total(per_station: FloatArray, cells: npt.NDArray[np.int64] | None) -> FloatArray:
    """Each station's cell total of ``per_station`` (one shared cell when ``cells`` is None)."""
    if cells is None:
        return np.full(len(per_station), float(per_station.sum()))
    totals = np.bincount(cells, weights=per_station)
    return np.asarray(totals[cells], dtype=np.float64)


def _cell_mean(per_station: FloatArray, cells: npt.NDArray[np.int64] | None) -> FloatArray:
    if cells is None:
        return np.full(len(per_station), float(per_station.mean()) if len(per_station) else 0.0)
    sums = np.bincount(cells, weights=per_station)
    counts = np.bincount(cells)
    return np.asarray((sums / np.maximum(counts, 1))[cells], dtype=np.float64)


def _prb_total_pct(
    used_share: FloatArray,
    share: FloatArray,
    cells: npt.NDArray[np.int64] | None,
    outside_load: bool,
) -> FloatArray:
    """A cell's PRB usage in % (RRU.PrbTot*): what its stations used, plus, with
    ``outside_load``, what each station's share leaves to stations outside the simulation."""
    outside = _cell_mean(1.0 - share, cells) if outside_load else 0.0
    return np.asarray(np.clip((_cell_total(used_share, cells) + outside) * 100, 0, 100))


def _noisy(values: FloatArray, relative: float, rng: np.random.Generator) -> FloatArray:
    return np.maximum(values * (1 + relative * rng.standard_normal(values.shape)), 0.0)


class NrTables:
    """Per-CQI rate at the full carrier, for inverting capacity → CQI and PRB share."""

    def __init__(self, carrier: nr_standard.NrCarrier) -> None:
        self.carrier = carrier
        cqis = range(1, len(nr_standard.CQI_TABLE_256QAM))
        self.sinr_min_db = np.array([nr.sinr_for_cqi(c) for c in cqis])
        self.layers = np.array(
            [nr.layers_for_sinr(s, carrier.max_layers_dl) for s in self.sinr_min_db]
        )
        efficiency = np.array([nr_standard.CQI_TABLE_256QAM[c][2] for c in cqis])
        self.full_dl_mbps = np.array(
            [
                carrier.rate_mbps(e, int(n), True)
                for e, n in zip(efficiency, self.layers, strict=True)
            ]
        )
        self.full_ul_mbps = np.array(
            [carrier.rate_mbps(e, carrier.max_layers_ul, False) for e in efficiency]
        )


def nr_report(
    tables: NrTables,
    capacity_dl: FloatArray,
    capacity_ul: FloatArray,
    available: npt.NDArray[np.bool_],
    rtt_ms: FloatArray,
    utilisation: Utilisation,
    rng: np.random.Generator,
    cells: npt.NDArray[np.int64] | None = None,
    outside_load: bool = False,
    nonideal: NonIdealities = IDEAL,
    utilisation_ul: Utilisation | None = None,
) -> NodeReport:
    index = np.minimum(
        np.searchsorted(tables.full_dl_mbps, capacity_dl), len(tables.full_dl_mbps) - 1
    )
    share = np.clip(capacity_dl / tables.full_dl_mbps[index], 0.0, 1.0)
    cqi = index + 1
    band_db = np.diff(np.append(tables.sinr_min_db, tables.sinr_min_db[-1] + 3.0))
    sinr = tables.sinr_min_db[index] + rng.uniform(0, 1, len(index)) * band_db[index]
    carried_dl = np.where(available, capacity_dl * utilisation, 0.0)
    uplink = _uplink(utilisation, utilisation_ul)
    carried_ul = np.where(available, capacity_ul * uplink, 0.0)
    prbs = tables.carrier.prbs
    # the share of its free PRBs the UE used for what it carried (nonideal.py)
    used = prb_fraction(utilisation, nonideal.nr_selective_gain)
    # The uplink's own channel: the slowest CQI-equivalent whose full-carrier uplink rate
    # reaches the capacity, and the PRB share that makes it exact (the whole carrier where no
    # rate of one layer reaches it).
    index_ul = np.minimum(
        np.searchsorted(tables.full_ul_mbps, capacity_ul), len(tables.full_ul_mbps) - 1
    )
    share_ul = np.clip(capacity_ul / tables.full_ul_mbps[index_ul], 0.0, 1.0)
    used_ul = prb_fraction(uplink, nonideal.nr_selective_gain)
    values: dict[str, FloatArray] = {
        "DRB.UEThpDl": np.round(_noisy(carried_dl, 0.02, rng) * 1000),
        "DRB.UEThpUl": np.round(_noisy(carried_ul, 0.02, rng) * 1000),
        "RRU.PrbUsedDl": np.round(np.where(available, share * prbs * used, 0.0)),
        "RRU.PrbAvailDl": np.full(len(index), float(prbs)),
        "RRU.PrbTotDl": _prb_total_pct(share * used, share, cells, outside_load),
        "RRU.PrbUsedUl": np.round(np.where(available, share_ul * prbs * used_ul, 0.0)),
        "RRU.PrbAvailUl": np.full(len(index), float(prbs)),
        "RRU.PrbTotUl": _prb_total_pct(share_ul * used_ul, share_ul, cells, outside_load),
        "CARR.AverageLayersDl": tables.layers[index].astype(np.float64),
        "CARR.WBCQIDist": np.full(len(index), 100.0),  # reports in the period, all in one bin
        "CARR.PDSCHMCSDist": np.full(len(index), 100.0),
        "DRB.RlcSduDelayDl": np.round(rtt_ms / 2 * 10),  # 0.1 ms units; half the RTT in the RAN
        "L1M.SS-SINR": np.clip(np.round(sinr + rng.normal(0, 1, len(index))), -23, 40),
        "L1M.SS-RSRP": np.clip(np.round(-105 + sinr + rng.normal(0, 2, len(index))), -156, -31),
    }
    mcs = np.array([nr.mcs_for_cqi(int(c)) for c in cqi], dtype=np.int64)
    # distBinX is 1-based: bin k holds CQI (or MCS) k - 1.
    return NodeReport(
        values,
        {"CARR.WBCQIDist": cqi.astype(np.int64) + 1, "CARR.PDSCHMCSDist": mcs + 1},
        unmeasured=~available,
        radio_names=NR_RADIO_NAMES,
        served_names=NR_SERVED_NAMES,
    )


class WifiTables:
    """Per (MCS, streams) configuration: the PHY rate and the SNR it needs, slowest first."""

    def __init__(self, link: wifi.WifiLink) -> None:
        self.link = link
        configs = [
            (link.phy_rate_mbps(m, s), m, s, max(wifi.HE_MCS_MIN_SNR_DB[m], 12.0 if s > 1 else 0.0))
            for s in (1, min(link.ap_streams, link.client_streams))
            for m in range(len(wifi.HE_MCS_MIN_SNR_DB))
        ]
        configs.sort()
        self.phy_mbps = np.array([c[0] for c in configs])
        self.mcs = np.array([c[1] for c in configs])
        self.streams = np.array([c[2] for c in configs])
        self.snr_db = np.array([c[3] for c in configs])


def wifi_report(
    tables: WifiTables,
    capacity_dl: FloatArray,
    capacity_ul: FloatArray,
    available: npt.NDArray[np.bool_],
    utilisation: Utilisation,
    rng: np.random.Generator,
    cells: npt.NDArray[np.int64] | None = None,
    outside_load: bool = False,
    nonideal: NonIdealities = IDEAL,
    utilisation_ul: Utilisation | None = None,
) -> NodeReport:
    # each station's own MAC efficiency (nonideal.py; the nominal one when ideal)
    own_efficiency = tables.link.mac_efficiency * station_factors(
        len(capacity_dl), nonideal.wifi_efficiency_spread
    )
    needed_phy = capacity_dl / own_efficiency
    index = np.minimum(np.searchsorted(tables.phy_mbps, needed_phy), len(tables.phy_mbps) - 1)
    phy = tables.phy_mbps[index]
    airtime = np.clip(needed_phy / phy, 0.0, 1.0)
    # The uplink's PHY rate, a mean over the period's frames (not one table rate: the station's
    # uplink MCS moves within a period), is the one its capacity needs in the station's share
    # of the channel's airtime (one channel for both directions: the share the downlink shows),
    # at most the fastest configuration's.
    phy_ul = np.minimum(
        capacity_ul / (own_efficiency * np.maximum(airtime, 1e-3)), tables.phy_mbps[-1]
    )
    if nonideal.wifi_contention_loss > 0:
        # the others' share of the channel costs efficiency, so the capacity takes more airtime
        others = (
            1.0 - airtime
            if outside_load
            else _cell_total(airtime * utilisation, cells) - airtime * utilisation
        )
        efficiency = wifi_efficiency(own_efficiency, others, nonideal.wifi_contention_loss)
        airtime = np.clip(capacity_dl / efficiency / phy, 0.0, 1.0)
    snr = tables.snr_db[index] + rng.uniform(0, 3, len(index))
    rssi = snr + tables.link.noise_dbm
    carried_dl = np.where(available, capacity_dl * utilisation, 0.0)
    carried_ul = np.where(available, capacity_ul * _uplink(utilisation, utilisation_ul), 0.0)
    outside = _cell_mean(1.0 - airtime, cells) if outside_load else 0.0
    busy = np.clip((_cell_total(airtime * utilisation, cells) + outside) * 100, 0, 100)
    values: dict[str, FloatArray] = {
        "WLAN.StaRssi": np.clip(np.round(rssi + rng.normal(0, 2, len(index))), -110, 0),
        "WLAN.StaSnr": np.clip(np.round(snr + rng.normal(0, 1, len(index))), -10, 80),
        "WLAN.StaMcsDl": tables.mcs[index].astype(np.float64),
        "WLAN.StaNssDl": tables.streams[index].astype(np.float64),
        "WLAN.ChannelWidth": np.full(len(index), float(tables.link.channel_mhz)),
        "WLAN.ChannelUtilization": busy,
        "WLAN.StaAirtime": np.round(np.where(available, airtime * utilisation * 100, 0.0), 1),
        "WLAN.StaPhyRateDl": np.round(phy, 1),
        "WLAN.StaPhyRateUl": np.round(phy_ul, 1),
        "WLAN.StaRetryRate": np.round(np.clip(10 - (snr - tables.snr_db[index]) * 2, 1, 30), 1),
        "WLAN.StaThpDl": np.round(_noisy(carried_dl, 0.02, rng) * 1000),
        "WLAN.StaThpUl": np.round(_noisy(carried_ul, 0.02, rng) * 1000),
    }
    return NodeReport(values, {}, unmeasured=~available, radio_names=WIFI_RADIO_NAMES)


def _uplink(utilisation: Utilisation, utilisation_ul: Utilisation | None) -> Utilisation:
    return utilisation if utilisation_ul is None else utilisation_ul


def lagged(report: NodeReport, lag: RadioLag, node: str) -> NodeReport:
    """The report with its radio measurements as of ``lag.periods`` reports before."""
    values, labels = lag.delay(
        node, report.values, report.labels, report.radio_names, report.unmeasured
    )
    return replace(report, values=values, labels=labels)


def lifi_report(
    capacity_dl: FloatArray,
    capacity_ul: FloatArray,
    available: npt.NDArray[np.bool_],
    utilisation: Utilisation,
    rng: np.random.Generator,
    utilisation_ul: Utilisation | None = None,
) -> NodeReport:
    snr = np.array([lifi.snr_for_rate(float(c)) for c in capacity_dl])
    phy_dl = np.where(capacity_dl > 0, capacity_dl, 0.0)
    carried_dl = np.where(available, capacity_dl * utilisation, 0.0)
    carried_ul = np.where(available, capacity_ul * _uplink(utilisation, utilisation_ul), 0.0)
    values: dict[str, FloatArray] = {
        "LIFI.StaSnr": np.clip(np.round(snr + rng.normal(0, 1, len(snr)), 1), -10, 60),
        "LIFI.StaPhyRateDl": np.round(np.where(available, phy_dl, 0.0), 1),
        # its uplink's rate is its uplink capacity, as the downlink's is (the scenario's uplink
        # series, or the radio model's UPLINK_SHARE of the downlink where it gives none)
        "LIFI.StaPhyRateUl": np.round(
            np.where(available, np.where(capacity_ul > 0, capacity_ul, 0.0), 0.0), 1
        ),
        "LIFI.LinkState": available.astype(np.float64),
        "LIFI.StaThpDl": np.round(_noisy(carried_dl, 0.02, rng) * 1000),
        "LIFI.StaThpUl": np.round(_noisy(carried_ul, 0.02, rng) * 1000),
    }
    return NodeReport(values, {})


def measured_radio(
    scenario: Scenario, times_s: npt.NDArray[np.floating[Any]]
) -> dict[str, FloatArray]:
    """NR paths whose scenario gives measured radio KPIs (``reported:``): KPI name → (ticks,
    CPEs), NaN where none is given (the node then reports what the capacity implies)."""
    found: dict[str, FloatArray] = {}
    for c, entry in enumerate(scenario.cpes):
        path = entry.paths.get("nr")
        if path is None or path.reported is None:
            continue
        key = (scenario.seed, entry.cpe.cpe_id, "nr", "reported")
        for name, series in (
            ("cqi", path.reported.cqi),
            ("L1M.SS-SINR", path.reported.sinr_db),
            ("L1M.SS-RSRP", path.reported.rsrp_dbm),
        ):
            if series is None:
                continue
            values = found.setdefault(name, np.full((len(times_s), len(scenario.cpes)), np.nan))
            values[:, c] = sample_series(
                series, np.asarray(times_s, dtype=np.float64), (*key, name)
            )
    return found


def with_measured(
    report: NodeReport,
    measured: Mapping[str, FloatArray],
    tick: int,
    members: npt.NDArray[np.int64],
) -> NodeReport:
    """``report`` with the measured radio KPIs in place of the inverted ones, where given."""
    if not measured:
        return report
    values = dict(report.values)
    labels = dict(report.labels)
    for name, series in measured.items():
        given_values = series[min(tick, len(series) - 1), members]
        given = np.isfinite(given_values)
        if name == "cqi":
            cqi = np.clip(np.round(np.nan_to_num(given_values)), 0, 15).astype(np.int64)
            # distBinX is 1-based: bin k holds CQI k - 1
            labels["CARR.WBCQIDist"] = np.where(given, cqi + 1, labels["CARR.WBCQIDist"])
        else:
            values[name] = np.where(given, np.round(given_values), values[name])
    return replace(report, values=values, labels=labels)
