"""The name a RIC knows an E2 node by (its MEID, the E2 manager's "inventory name").

O-RAN SC's E2 termination builds it from the Global E2 node ID of the E2 setup, and the E2
manager stores it unchanged, so it is the name xApps address nodes by. For a gNB (style
``o-ran-sc``):

    gnb_<MCC>_<MNC>_<gNB ID in hex>           gNB-ID bit length 22–24: 6 hex digits; 25–32: 8
    gnbc_<MCC>_<MNC>_<gNB ID>_<CU-UP ID>      only a gNB-CU-UP-ID present (hex, no padding)
    gnbd_<MCC>_<MNC>_<gNB ID>_<DU ID>         only a gNB-DU-ID present

MCC and MNC are decimal digits from the TBCD PLMN identity; a two-digit MNC is written with a
leading 0 (``01`` → ``001``). For a three-digit MNC, current E2 terminations (since 2023) print
its digits in the order 3, 1, 2 (MNC 410 → ``041``): we do the same, since the point is to match
the RIC's name. Example: PLMN 001/01 (bytes 00 f1 10), 32-bit gNB ID 411 → ``gnb_001_001_0000019b``.

Style ``plmn-hex`` is the rule of this project's earlier releases: ``gnb_<PLMN bytes in hex>_<gNB
ID in 8 hex digits>`` (``gnb_00f110_0000019b``), kept for deployments that configured such names.
"""

from __future__ import annotations

from typing import Literal

NamingStyle = Literal["o-ran-sc", "plmn-hex"]
DEFAULT_STYLE: NamingStyle = "o-ran-sc"


def plmn_digits(plmn: bytes) -> tuple[str, str]:
    """(MCC, MNC) as the E2 termination prints them, from a 3-byte TBCD PLMN identity."""
    if len(plmn) != 3:
        raise ValueError(f"a PLMN identity has 3 bytes, not {len(plmn)}")
    nibbles = [(octet & 0x0F, octet >> 4) for octet in plmn]
    (d1, d2), (d3, filler), (m1, m2) = nibbles
    mcc = f"{d1}{d2}{d3}"
    mnc = f"0{m1}{m2}" if filler == 0xF else f"{filler}{m1}{m2}"
    return mcc, mnc


def e2_node_name(
    plmn: bytes,
    gnb_id: int,
    gnb_id_bits: int = 32,
    cu_up_id: int | None = None,
    du_id: int | None = None,
    style: NamingStyle = DEFAULT_STYLE,
) -> str:
    """``plmn`` is the 3-byte TBCD PLMN identity; ``gnb_id`` the gNB ID of ``gnb_id_bits`` bits."""
    if style == "plmn-hex":
        return f"gnb_{plmn.hex()}_{gnb_id:08x}"
    if not 22 <= gnb_id_bits <= 32:
        raise ValueError(f"a gNB ID has 22 to 32 bits, not {gnb_id_bits}")
    mcc, mnc = plmn_digits(plmn)
    width = 2 * ((gnb_id_bits + 7) // 8)
    base = f"{mcc}_{mnc}_{gnb_id:0{width}x}"
    if cu_up_id is not None and du_id is None:
        return f"gnbc_{base}_{cu_up_id:x}"
    if du_id is not None and cu_up_id is None:
        return f"gnbd_{base}_{du_id:x}"
    return f"gnb_{base}"
