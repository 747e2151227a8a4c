"""Fuzzing the E2 decoders: random and mutated bytes never raise anything but CodecError,
and the indication processor never raises at all. Bounded (max_examples) so it runs in CI."""

from __future__ import annotations

import contextlib
import json
from collections.abc import Callable
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from core.domain import AccessIdentity, Cpe
from kpm import builders, e2ap
from kpm.codec import KpmPdu, codec_for
from kpm.errors import CodecError
from kpm.reports import decode_header, decode_message
from kpm.ueid import gnb_du_ueid
from kpm.versions import KpmVersion
from xapp.e2.config import E2NodeConfig
from xapp.e2.indications import IndicationProcessor

FUZZ = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
VECTORS = json.loads((Path(__file__).parent / "vectors" / "e2sm_kpm.json").read_text())["vectors"]
SEEDS = [bytes.fromhex(v["hex"]) for v in VECTORS]
V3 = KpmVersion.V3_00


def _indication_pdu() -> bytes:
    codec = codec_for(V3)
    header = codec.encode(KpmPdu.HEADER, builders.header(1.7e9, V3, sender_name="gnb"))
    message = codec.encode(
        KpmPdu.MESSAGE,
        builders.message_format3(
            [(gnb_du_ueid(7), ["DRB.UEThpDl", "RRU.PrbUsedDl"], [[1000, 5]])], 1000
        ),
    )
    return e2ap.encode(e2ap.Indication(e2ap.RicRequestId(1, 1), 2, 1, header, message, 3))


PDU_SEEDS = [
    _indication_pdu(),
    e2ap.encode(e2ap.SubscriptionResponse(e2ap.RicRequestId(1, 1), 2, (1,))),
    e2ap.encode(
        e2ap.SubscriptionFailure(e2ap.RicRequestId(1, 1), 2, ("ricRequest", "unspecified"))
    ),
]


@st.composite
def mutated(draw: st.DrawFn, seeds: list[bytes]) -> bytes:
    data = bytearray(draw(st.sampled_from(seeds)))
    for _ in range(draw(st.integers(1, 4))):
        action = draw(st.sampled_from(["flip", "truncate", "insert", "delete"]))
        position = draw(st.integers(0, max(len(data) - 1, 0)))
        if action == "flip" and data:
            data[position] ^= 1 << draw(st.integers(0, 7))
        elif action == "truncate":
            del data[position:]
        elif action == "insert":
            data[position:position] = draw(st.binary(min_size=1, max_size=4))
        elif data:
            del data[position]
    return bytes(data)


any_bytes = st.one_of(st.binary(max_size=256), mutated(SEEDS), mutated(PDU_SEEDS))


def only_codec_errors(call: Callable[[], object]) -> None:
    with contextlib.suppress(CodecError):
        call()


@FUZZ
@given(data=any_bytes, pdu=st.sampled_from(list(KpmPdu)), version=st.sampled_from(list(KpmVersion)))
def test_kpm_decoders_raise_only_codec_errors(
    data: bytes, pdu: KpmPdu, version: KpmVersion
) -> None:
    only_codec_errors(lambda: codec_for(version).decode(pdu, data))
    only_codec_errors(lambda: decode_header(data, version))
    only_codec_errors(lambda: decode_message(data, version, ["DRB.UEThpDl"]))


@FUZZ
@given(data=any_bytes)
def test_e2ap_decoder_raises_only_codec_errors(data: bytes) -> None:
    only_codec_errors(lambda: e2ap.decode(data))


PROCESSOR = IndicationProcessor(
    [Cpe("cpe-1", {"nr": AccessIdentity("nr", e2_node_id="gnb", ue_id="gnb-du:7")})]
)
PROCESSOR.set_node(
    E2NodeConfig(node="gnb", access="nr", measurements=("DRB.UEThpDl", "RRU.PrbUsedDl")), V3
)


@FUZZ
@given(data=any_bytes)
def test_indication_processor_never_raises(data: bytes) -> None:
    samples = PROCESSOR.handle_payload("gnb", data)
    assert all(s.cpe_id == "cpe-1" for s in samples)
