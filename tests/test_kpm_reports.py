"""Reading indication messages into records: the pairing rule and the three formats."""

from kpm import builders
from kpm.codec import KpmPdu, codec_for
from kpm.reports import decode_message, report_from_value
from kpm.ueid import gnb_du_ueid, ue_keys
from kpm.versions import KpmVersion

V3 = KpmVersion.V3_00
UE7 = gnb_du_ueid(7, "02:00:00:00:00:07")
UE8 = gnb_du_ueid(8)


def test_format1_pairs_info_j_with_record_j_in_every_period() -> None:
    value = builders.message_format1(["A.x", "B.y", "C.z"], [[1, 2.5, None], [4, 5, 6]], 500)
    report = report_from_value(value)
    assert report.message_format == 1
    assert report.granularity_ms == 500
    assert [(r.period_index, r.name, r.value) for r in report.records] == [
        (0, "A.x", 1.0),
        (0, "B.y", 2.5),
        (0, "C.z", None),
        (1, "A.x", 4.0),
        (1, "B.y", 5.0),
        (1, "C.z", 6.0),
    ]


def test_short_record_skips_that_period_only() -> None:
    value = builders.message_format1(["A.x", "B.y"], [[1, 2], [3], [5, 6]], 1000)
    report = report_from_value(value)
    assert [(r.period_index, r.name) for r in report.records] == [
        (0, "A.x"),
        (0, "B.y"),
        (2, "A.x"),
        (2, "B.y"),
    ]
    assert [p.cause for p in report.problems] == ["record-length"]
    assert "1 values for 2 measurements" in report.problems[0].message


def test_missing_meas_info_uses_the_subscribed_names() -> None:
    value = builders.message_format1(["A.x"], [[9]], 1000)
    del value["indicationMessage-formats"][1]["measInfoList"]
    assert [r.name for r in report_from_value(value, ["DRB.UEThpDl"]).records] == ["DRB.UEThpDl"]
    bare = report_from_value(value)
    assert bare.records == ()
    assert bare.problems[0].cause == "no-meas-info"


def test_format3_records_carry_the_ue_keys() -> None:
    value = builders.message_format3([(UE7, ["A.x"], [[1]]), (UE8, ["A.x", "B.y"], [[2, 3]])], 1000)
    data = codec_for(V3).encode(KpmPdu.MESSAGE, value)
    report = decode_message(data, V3)
    assert report.message_format == 3
    assert [(r.ue_keys[0], r.name, r.value) for r in report.records] == [
        ("gnb-du:7", "A.x", 1.0),
        ("gnb-du:8", "A.x", 2.0),
        ("gnb-du:8", "B.y", 3.0),
    ]
    assert report.records[0].ue_keys == (
        "gnb-du:7",
        "ran:0000020000000007",
        "mac:02:00:00:00:00:07",
    )


def test_format2_maps_a_value_to_a_ue_only_when_one_ue_matched() -> None:
    value = builders.message_format2(
        [("A.x", [UE7]), ("A.x", [UE7, UE8]), ("B.y", [])], [[1, 2, 3]], 1000
    )
    records = report_from_value(value).records
    assert [(r.name, r.ue_keys[:1], r.value) for r in records] == [
        ("A.x", ("gnb-du:7",), 1.0),
        ("A.x", (), 2.0),
        ("B.y", (), 3.0),
    ]


def test_labels_are_kept() -> None:
    value = builders.message_format1(["CARR.WBCQIDist"], [[7]], 1000)
    info = value["indicationMessage-formats"][1]["measInfoList"][0]
    info["labelInfoList"] = [{"measLabel": {"distBinX": 12, "plmnID": b"\x00\xf1\x10"}}]
    (record,) = report_from_value(value).records
    assert record.labels == {"distBinX": 12, "plmnID": "00f110"}


def test_unknown_ueid_alternative_has_no_keys() -> None:
    assert ue_keys(("someFutureUEID", {"x": 1})) == ()
    assert ue_keys("not a ueid") == ()
    assert ue_keys(("gNB-UEID", {"amf-UE-NGAP-ID": 5})) == ("gnb:5",)


def test_ran_function_description_says_what_a_node_offers() -> None:
    from kpm.reports import read_ran_function
    from kpm.versions import OID_BY_VERSION

    styles = [
        builders.report_style(1, ["RRU.PrbAvailDl"]),
        builders.report_style(4, ["DRB.UEThpDl"]),
    ]
    value = builders.ran_function_description(V3, "ORAN-E2SM-KPM", "KPM Monitor", styles)
    info = read_ran_function(codec_for(V3).encode(KpmPdu.RANFUNCTION, value), V3)
    assert info.oid == OID_BY_VERSION[V3]
    assert info.report_styles == {1: ("RRU.PrbAvailDl",), 4: ("DRB.UEThpDl",)}
    assert info.offers(4, ["DRB.UEThpDl", "DRB.UEThpUl"]) == ["DRB.UEThpUl"]
