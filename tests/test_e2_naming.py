"""E2 node names as O-RAN SC's E2 termination builds them, and E2AP v1.01-shaped setups."""

from __future__ import annotations

import pytest

from core.e2_naming import e2_node_name, plmn_digits
from kpm import e2ap

PLMN_001_01 = bytes.fromhex("00f110")  # TBCD: MCC 001, MNC 01 (filler F)
PLMN_310_410 = bytes.fromhex("130014")  # MCC 310, three-digit MNC 410


def test_plmn_digits_follow_tbcd() -> None:
    assert plmn_digits(PLMN_001_01) == ("001", "001")
    assert plmn_digits(bytes.fromhex("05f510")) == ("505", "001")
    # Three-digit MNCs come out as current E2 terminations print them (digits 3, 1, 2).
    assert plmn_digits(PLMN_310_410) == ("310", "041")
    with pytest.raises(ValueError, match="3 bytes"):
        plmn_digits(b"\x00\xf1")


@pytest.mark.parametrize(
    ("kwargs", "name"),
    [
        ({"gnb_id": 411}, "gnb_001_001_0000019b"),  # the srsRAN capture's node as E2T named it
        ({"gnb_id": 411, "gnb_id_bits": 22}, "gnb_001_001_00019b"),
        ({"gnb_id": 411, "gnb_id_bits": 24}, "gnb_001_001_00019b"),
        ({"gnb_id": 411, "gnb_id_bits": 25}, "gnb_001_001_0000019b"),
        ({"gnb_id": 1, "cu_up_id": 12345}, "gnbc_001_001_00000001_3039"),
        ({"gnb_id": 1, "du_id": 6789}, "gnbd_001_001_00000001_1a85"),
        ({"gnb_id": 1, "cu_up_id": 1, "du_id": 2}, "gnb_001_001_00000001"),
        ({"gnb_id": 411, "style": "plmn-hex"}, "gnb_00f110_0000019b"),
    ],
)
def test_node_names(kwargs: dict[str, object], name: str) -> None:
    assert e2_node_name(PLMN_001_01, **kwargs) == name  # type: ignore[arg-type]


def test_a_setup_names_its_node_from_its_global_id() -> None:
    function = e2ap.RanFunction(2, b"\x00", 1, "1.3.6.1.4.1.53148.1.3.2.2")
    request = e2ap.E2SetupRequest(7, PLMN_001_01, 0x19B, (function,), gnb_id_bits=22, du_id=5)
    decoded = e2ap.decode(e2ap.encode(request))
    assert decoded == request
    assert isinstance(decoded, e2ap.E2SetupRequest)
    assert decoded.node_name == "gnbd_001_001_00019b_5"
    assert decoded.name_in("plmn-hex") == "gnb_00f110_0000019b"


def test_an_e2ap_v1_01_shaped_setup_is_accepted_and_answered_in_its_shape() -> None:
    function = e2ap.RanFunction(2, b"\x00", 1, "1.3.6.1.4.1.53148.1.2.2.2")
    request = e2ap.E2SetupRequest(None, PLMN_001_01, 1, (function,))
    data = e2ap.encode(request)
    assert bytes.fromhex("0031") not in data[:8]  # no TransactionID IE (id 49) up front
    decoded = e2ap.decode(data)
    assert isinstance(decoded, e2ap.E2SetupRequest)
    assert decoded.transaction_id is None
    answer = e2ap.decode(e2ap.encode(e2ap.E2SetupResponse(decoded.transaction_id, (2,))))
    assert answer == e2ap.E2SetupResponse(None, (2,))
