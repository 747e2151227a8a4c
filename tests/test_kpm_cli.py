"""`atsss kpm decode|encode|catalogue` as a user runs them."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from kpm import builders, e2ap
from kpm.codec import KpmPdu, codec_for
from kpm.versions import KpmVersion

V2, V3 = KpmVersion.V2_03, KpmVersion.V3_00


def atsss(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "atsss", *args], capture_output=True, text=True, timeout=120
    )


def v2_indication_hex() -> str:
    codec = codec_for(V2)
    indication = e2ap.Indication(
        e2ap.RicRequestId(1, 2),
        2,
        1,
        codec.encode(KpmPdu.HEADER, builders.header(1_700_000_000, V2, sender_name="gnb")),
        codec.encode(KpmPdu.MESSAGE, builders.message_format1(["DRB.UEThpDl"], [[5]], 1000)),
    )
    return e2ap.encode(indication).hex()


def test_decode_says_which_version_it_detected(tmp_path: Path) -> None:
    result = atsss("kpm", "decode", v2_indication_hex())
    assert result.returncode == 0, result.stderr
    out = json.loads(result.stdout)
    header = out["decoded"]["header"]
    assert header["version"] == "v2.03"
    assert header["note"] == "detected E2SM-KPM v2.03 from the indication header"
    assert header["collect_start_unix_s"] == 1_700_000_000
    assert out["decoded"]["message"]["value"]["indicationMessage-formats"][
        "indicationMessage-Format1"
    ]["measData"] == [{"measRecord": [{"integer": 5}]}]
    forced = json.loads(atsss("kpm", "decode", "--version", "v3.00", v2_indication_hex()).stdout)
    assert "expected E2SM-KPM v3.00 but the header is v2.03" in forced["decoded"]["header"]["note"]


def test_encode_reverses_decode_for_e2ap_and_kpm(tmp_path: Path) -> None:
    original = v2_indication_hex()
    decoded = atsss("kpm", "decode", original).stdout
    (tmp_path / "pdu.json").write_text(decoded)
    assert atsss("kpm", "encode", f"@{tmp_path / 'pdu.json'}").stdout.strip() == original
    header_hex = codec_for(V3).encode(KpmPdu.HEADER, builders.header(1_700_000_000.5, V3)).hex()
    header_json = atsss("kpm", "decode", "--as", "header", header_hex).stdout
    assert atsss("kpm", "encode", header_json).stdout.strip() == header_hex
    (tmp_path / "raw.bin").write_bytes(bytes.fromhex(header_hex))
    assert (
        json.loads(atsss("kpm", "decode", "--as", "header", f"@{tmp_path / 'raw.bin'}").stdout)[
            "version"
        ]
        == "v3.00"
    )


def test_bad_input_is_one_clear_line_and_exit_2() -> None:
    for args, expected in [
        (("kpm", "decode", "zz"), "neither hex digits"),
        (("kpm", "decode", "abc"), "odd number of hex digits"),
        (("kpm", "decode", "0011"), "not a valid E2AP PDU"),
        (("kpm", "decode", "--as", "header", "0800"), "no E2SM-KPM layout we know"),
        (("kpm", "decode", "--version", "v9", "00"), "unknown E2SM-KPM version"),
        (("kpm", "decode", "@/nonexistent"), "cannot read /nonexistent"),
        (("kpm", "encode", "{"), "input is not JSON"),
        (
            ("kpm", "encode", "--as", "trigger", '{"x": 1}'),
            "cannot encode E2SM-KPM v3.00 trigger",
        ),
    ]:
        result = atsss(*args)
        assert result.returncode == 2, (args, result.stderr)
        assert result.stderr.startswith("error: ")
        assert expected in result.stderr
        assert result.stderr.count("\n") == 1, result.stderr


def test_catalogue_lists_every_access() -> None:
    result = atsss("kpm", "catalogue")
    assert result.returncode == 0
    for name in ("DRB.UEThpDl", "CARR.PDSCHMCSDist", "WLAN.StaAirtime", "LIFI.LinkState"):
        assert name in result.stdout


def test_bench_e2_prints_figures() -> None:
    result = atsss("bench", "e2", "--ues", "20", "--repeats", "1")
    assert result.returncode == 0, result.stderr
    assert "UE reports/s" in result.stdout
    assert "40" in result.stdout  # 20 UEs → 40 samples (downlink and uplink)


def test_encode_rejects_odd_json_in_one_line(tmp_path: Path) -> None:
    (tmp_path / "latin1.json").write_bytes(b'{"x": "\xff"}')
    for args, expected in [
        (("kpm", "encode", '{"as": "bogus"}'), "in the JSON"),
        (
            ("kpm", "encode", '{"as": "header", "version": "v9", "value": {}}'),
            "unknown E2SM-KPM version",
        ),
        (("kpm", "encode", '{"as": "header", "version": 3, "value": {}}'), "cannot encode"),
        (("kpm", "encode", f"@{tmp_path / 'latin1.json'}"), "input is not JSON"),
        (("kpm", "encode", '{"type": "Indication", "fields": {"header": 5}}'), "missing field"),
    ]:
        result = atsss(*args)
        assert result.returncode == 2, (args, result.stderr)
        assert result.stderr.startswith("error: "), result.stderr
        assert expected in result.stderr, result.stderr
        assert result.stderr.count("\n") == 1, result.stderr
