"""How a scenario's E2 nodes and UEs are named: the simulator's convention, shared with the
standalone xApp.

One E2 node per access (a gNB for nr, an access point for wifi and for lifi), all CPEs attached
to each. A CPE's UE on every node is ``gnb-du:<n>`` (its position in the scenario, from 1);
the access points also put the station's MAC address (02:00:00:xx:xx:xx, locally
administered, n in the low bytes) in the RAN UE ID.
"""

from __future__ import annotations

from collections.abc import Mapping

from core.deployment import Deployment, parse_deployment
from core.domain import AccessIdentity, Cpe
from core.e2_naming import e2_node_name
from core.scenario.model import Scenario

PLMN = b"\x00\xf1\x10"  # MCC 001, MNC 01 (test network)
GNB_IDS = {"nr": 1, "wifi": 2, "lifi": 3}

# What each node offers (its RAN function description) and what the standalone xApp asks for.
OFFERED: dict[str, tuple[str, ...]] = {
    "nr": (
        "DRB.UEThpDl",
        "DRB.UEThpUl",
        "RRU.PrbUsedDl",
        "RRU.PrbAvailDl",
        "RRU.PrbTotDl",
        "RRU.PrbUsedUl",
        "RRU.PrbAvailUl",
        "RRU.PrbTotUl",
        "CARR.AverageLayersDl",
        "CARR.WBCQIDist",
        "CARR.PDSCHMCSDist",
        "DRB.RlcSduDelayDl",
        "L1M.SS-RSRP",
        "L1M.SS-SINR",
    ),
    "wifi": (
        "WLAN.StaRssi",
        "WLAN.StaSnr",
        "WLAN.StaMcsDl",
        "WLAN.StaNssDl",
        "WLAN.ChannelWidth",
        "WLAN.ChannelUtilization",
        "WLAN.StaAirtime",
        "WLAN.StaPhyRateDl",
        "WLAN.StaPhyRateUl",
        "WLAN.StaRetryRate",
        "WLAN.StaThpDl",
        "WLAN.StaThpUl",
    ),
    "lifi": (
        "LIFI.StaSnr",
        "LIFI.StaPhyRateDl",
        "LIFI.StaPhyRateUl",
        "LIFI.LinkState",
        "LIFI.StaThpDl",
        "LIFI.StaThpUl",
    ),
}
# What a deployment subscribes to by default: every measurement the xApp's estimators read
# (tests/test_subscribed_needs.py holds them to xapp/estimators/kpi.py and model.py). With
# less, they read what they can: four per node (throughput, one resource KPI, one radio KPI)
# left NR without its free PRBs and the Wi-Fi and LiFi uplinks without a PHY rate, so each of
# those paths was known only from below, and the uplink weights ran down to one path.
DEFAULT_SUBSCRIBED: dict[str, tuple[str, ...]] = {
    "nr": (
        "DRB.UEThpDl",
        "DRB.UEThpUl",
        "RRU.PrbUsedDl",
        "RRU.PrbAvailDl",
        "RRU.PrbTotDl",
        "RRU.PrbUsedUl",
        "RRU.PrbAvailUl",
        "RRU.PrbTotUl",
        "CARR.AverageLayersDl",
        "CARR.WBCQIDist",
        "L1M.SS-SINR",
        "L1M.SS-RSRP",
    ),
    "wifi": (
        "WLAN.StaThpDl",
        "WLAN.StaThpUl",
        "WLAN.StaPhyRateDl",
        "WLAN.StaPhyRateUl",
        "WLAN.StaAirtime",
        "WLAN.ChannelUtilization",
        "WLAN.StaRssi",
        "WLAN.StaSnr",
        "WLAN.StaMcsDl",
        "WLAN.StaNssDl",
    ),
    "lifi": (
        "LIFI.StaThpDl",
        "LIFI.StaThpUl",
        "LIFI.StaPhyRateDl",
        "LIFI.StaPhyRateUl",
        "LIFI.LinkState",
        "LIFI.StaSnr",
    ),
}


def offered(scenario: Scenario, access: str) -> tuple[str, ...]:
    """What the simulated node of ``access`` offers in its E2 setup: all it can make, or the
    scenario's ``nodes.<access>.measurements`` of those."""
    can = scenario.node_measurements.get(access)
    return OFFERED[access] if can is None else tuple(n for n in OFFERED[access] if n in can)


def subscribed(scenario: Scenario, access: str) -> tuple[str, ...]:
    """What a deployment made for the scenario subscribes to: the usual few, or everything a
    node that offers less does offer."""
    if access not in scenario.node_measurements:
        return DEFAULT_SUBSCRIBED[access]
    return offered(scenario, access)


def node_name(access: str) -> str:
    if access not in GNB_IDS:
        raise ValueError(f"the simulator models nr, wifi and lifi, not {access!r}")
    return e2_node_name(PLMN, GNB_IDS[access])


def station_mac(position: int) -> str:
    return "02:00:00:" + ":".join(f"{(position >> s) & 0xFF:02x}" for s in (16, 8, 0))


def e2_cpes(scenario: Scenario) -> list[Cpe]:
    """The scenario's CPEs with the E2 identities the simulator uses."""
    cpes = []
    for position, entry in enumerate(scenario.cpes, 1):
        accesses = {
            access: AccessIdentity(
                access,
                e2_node_id=node_name(access),
                ue_id=f"gnb-du:{position}",
                station_mac=None if access == "nr" else station_mac(position),
            )
            for access in entry.paths
        }
        cpes.append(Cpe(entry.cpe.cpe_id, accesses))
    return cpes


def scenario_deployment(
    scenario: Scenario,
    report_period_ms: int = 1000,
    cpe_agents: Mapping[str, str] | None = None,
    proxy_agent: str | None = None,
    per_ue: bool = True,
) -> Deployment:
    """The deployment configuration that matches a simulated scenario: one node per access, each
    CPE known by the identities the simulator's nodes report, agents where given."""
    agents = dict(cpe_agents or {})
    unknown = sorted(set(agents) - set(scenario.cpe_ids))
    if unknown:
        raise ValueError(f"agents for CPEs the scenario does not have: {', '.join(unknown)}")
    document = {
        "e2": {
            "nodes": [
                {
                    "name": node_name(access),
                    "access": access,
                    "measurements": list(subscribed(scenario, access)),
                    "report_period_ms": report_period_ms,
                    "report": "per-ue" if per_ue else "cell",
                }
                for access in scenario.access_names
            ]
        },
        "cpes": [
            {
                "id": cpe.cpe_id,
                "accesses": {
                    name: {"ue_id": identity.ue_id, "station_mac": identity.station_mac}
                    for name, identity in cpe.accesses.items()
                },
                **({"agent": {"url": agents[cpe.cpe_id]}} if cpe.cpe_id in agents else {}),
            }
            for cpe in e2_cpes(scenario)
        ],
        **({"agents": {"proxy": {"url": proxy_agent}}} if proxy_agent else {}),
    }
    return parse_deployment(document, f"scenario {scenario.name}")
