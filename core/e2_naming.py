"""The name a RIC knows an E2 node by (the E2 manager's MEID), from its global gNB ID."""

from __future__ import annotations


def e2_node_name(plmn: bytes, gnb_id: int) -> str:
    """``plmn`` is the 3-byte TBCD PLMN identity; ``gnb_id`` the node's 32-bit gNB ID."""
    return f"gnb_{plmn.hex()}_{gnb_id:08x}"
