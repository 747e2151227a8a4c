"""E2AP messages through pycrate: every message round-trips; garbage is a CodecError."""

import pytest

from kpm import e2ap
from kpm.errors import CodecError

RID = e2ap.RicRequestId(1001, 7)
MESSAGES: list[e2ap.E2apMessage] = [
    e2ap.E2SetupRequest(
        3,
        b"\x00\xf1\x10",
        0xBEEF,
        (e2ap.RanFunction(2, b"\x01\x02", 1, "1.3.6.1.4.1.53148.1.3.2.2"),),
    ),
    e2ap.E2SetupResponse(3, (2,)),
    e2ap.SubscriptionRequest(RID, 2, b"\x08\x03\xe7", (e2ap.ActionToSetup(1, b"\x00\x01"),)),
    e2ap.SubscriptionResponse(RID, 2, (1,), ((2, ("ricRequest", "action-not-supported")),)),
    e2ap.SubscriptionFailure(RID, 2, ("ricRequest", "action-not-supported")),
    e2ap.SubscriptionDeleteRequest(RID, 2),
    e2ap.SubscriptionDeleteResponse(RID, 2),
    e2ap.Indication(RID, 2, 1, b"\x08", b"\x00", sequence_number=42),
    e2ap.Indication(RID, 2, 1, b"\x08", b"\x00"),
]


@pytest.mark.parametrize("message", MESSAGES, ids=lambda m: type(m).__name__)
def test_round_trip(message: e2ap.E2apMessage) -> None:
    assert e2ap.decode(e2ap.encode(message)) == message


def test_setup_names_the_node_like_the_ric() -> None:
    assert MESSAGES[0].node_name == "gnb_001_001_0000beef"  # type: ignore[union-attr]


@pytest.mark.parametrize("data", [b"", b"\x00", b"\xff" * 10, e2ap.encode(MESSAGES[-1])[:-3]])
def test_garbage_is_a_codec_error(data: bytes) -> None:
    with pytest.raises(CodecError) as error:
        e2ap.decode(data)
    assert error.value.cause in {"empty", "e2ap-malformed", "e2ap-content", "e2ap-unsupported"}


def test_bad_value_does_not_encode() -> None:
    with pytest.raises(CodecError, match="cannot encode SubscriptionFailure"):
        e2ap.encode(e2ap.SubscriptionFailure(RID, 2, ("ricRequest", "no-such-cause")))
