"""The C core of the fast reader (`kpm/_fast_message.c`) against its pure-Python twin.

The twins must take exactly the same bytes and return equal reports: on generated messages of
every shape, on every shared interop vector, on every single-bit flip and every cut of
representative messages, and on bytes that are no message at all. (That what they take the
generic reader takes alike is tests/test_fast_message.py's, for both.)
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kpm import fast_message
from kpm.codec import KpmPdu, codec_for
from kpm.fast_message import FAST_LAYOUTS, read_message
from kpm.reports import records_of_columns
from kpm.versions import KpmVersion

from .test_fast_message import NAMES, _representative, _vector_messages, messages, same


def test_the_core_was_built() -> None:
    """`pip install` builds it wherever a compiler is, and the setup script installs one: a
    machine that runs the suite without it would measure and test the slow twin alone."""
    if os.environ.get("ATSSS_PURE_PYTHON") == "1":
        pytest.skip("ATSSS_PURE_PYTHON=1 leaves the core out on purpose")
    assert fast_message.COMPILED, "kpm._fast_message was not built: is a C compiler installed?"
    # The extension is optional: a source that no longer compiles leaves the last build in
    # place, which would be tested instead of the source. The build carries its source's hash.
    source = Path(fast_message.__file__).with_name("_fast_message.c")
    if source.exists():
        wanted = hashlib.sha256(source.read_bytes()).hexdigest()
        assert wanted == fast_message._core.SOURCE_SHA256, (
            "kpm._fast_message was built from another source: it did not compile "
            "(pip install -v -e . says why)"
        )


def twins_agree(data: bytes, layout: KpmVersion, names: tuple[str, ...] = NAMES) -> bool:
    """Both twins take the bytes or both hand them over, with equal reports; True: taken."""
    python = read_message(data, layout, names, compiled=False)
    core = read_message(data, layout, names, compiled=True)
    assert (core is None) == (python is None), (
        f"{'the core' if core is not None else 'the Python twin'} alone took {data.hex()} "
        f"as {layout}"
    )
    columns = fast_message.read_columns(data, layout, names)
    if columns is not None:
        # the columns stand for exactly the core's records: its usual Format 3, nothing amiss
        assert core is not None, f"the core took {data.hex()} ({layout}) as columns alone"
        assert core.message_format == 3
        assert not core.problems
        assert columns.granularity_ms == core.granularity_ms
        assert records_of_columns(columns) == list(core.records)
    if core is None or python is None:
        return False
    assert same(core, python), f"the twins read {data.hex()} ({layout}) differently"
    assert core.records == python.records or any(
        r.value != r.value
        for r in python.records  # NaN: same() compared those
    )
    return True


needs_core = pytest.mark.skipif(
    not fast_message.COMPILED, reason="the core is not built (test_the_core_was_built says why)"
)


@needs_core
@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(message=messages(), layout=st.sampled_from(FAST_LAYOUTS))
def test_generated_messages_are_read_alike_by_the_twins(
    message: tuple[dict[str, Any], tuple[str, ...]], layout: KpmVersion
) -> None:
    value, names = message
    data = codec_for(layout).encode(KpmPdu.MESSAGE, value)
    for reading in FAST_LAYOUTS:
        twins_agree(data, reading, names)
        twins_agree(data, reading, ())


@needs_core
@pytest.mark.parametrize(("data", "layout"), _representative(), ids=["f3", "flexric-f3", "f1"])
def test_every_bit_flip_and_every_cut_is_read_alike_by_the_twins(
    data: bytes, layout: KpmVersion
) -> None:
    assert twins_agree(data, layout)
    taken = 0
    for position in range(len(data) * 8):
        flipped = bytearray(data)
        flipped[position // 8] ^= 0x80 >> (position % 8)
        for reading in FAST_LAYOUTS:
            taken += twins_agree(bytes(flipped), reading)
    for size in range(len(data) + 2):
        cut = data[:size] if size <= len(data) else data + b"\x00"
        twins_agree(cut, layout)
    assert taken > 0


@needs_core
@pytest.mark.parametrize(("vector_id", "data"), _vector_messages(), ids=lambda v: str(v)[:40])
def test_interop_vectors_are_read_alike_by_the_twins(vector_id: str, data: bytes) -> None:
    for layout in FAST_LAYOUTS:
        twins_agree(data, layout, ())
        twins_agree(data, layout, NAMES)


@needs_core
@settings(max_examples=500, deadline=None)
@given(data=st.binary(max_size=200), layout=st.sampled_from(FAST_LAYOUTS))
def test_bytes_that_are_no_message_are_handed_over_alike(data: bytes, layout: KpmVersion) -> None:
    twins_agree(data, layout)


@needs_core
def test_a_large_fragmented_message_is_read_alike_by_the_twins() -> None:
    """A 1,000-UE Format 3 message travels as a fragmented open type (over 16K)."""
    from kpm import builders
    from kpm.ueid import gnb_du_ueid

    reports: list[tuple[Any, list[str], list[list[builders.RecordValue]]]] = [
        (
            gnb_du_ueid(n, f"02:00:00:00:{n // 256:02x}:{n % 256:02x}"),
            list(NAMES),
            [[n, 2.5, 7, None]],
        )
        for n in range(1000)
    ]
    data = codec_for(KpmVersion.V3_00).encode(
        KpmPdu.MESSAGE, builders.message_format3(reports, 1000)
    )
    assert len(data) > 16384
    assert twins_agree(data, KpmVersion.V3_00)


@needs_core
@pytest.mark.parametrize("bins", [3, 40])
def test_ues_naming_recurring_labels_are_read_alike_by_the_twins(bins: int) -> None:
    """A fleet's Format 3 message where each UE names its own CQI bin: a few label lists recur
    in no order among 1,000 UEs (the core keeps the last sixteen it read; 40 bins overflow
    it), read as the generic path reads them, columns and records alike."""
    import random

    from kpm import builders
    from kpm.ueid import gnb_du_ueid

    draw = random.Random(bins)
    items = []
    for n in range(1000):
        body = builders.message_format1_body(NAMES, [[n, 2.5, 7, None]], None)
        body["measInfoList"][-1]["labelInfoList"] = [
            {"measLabel": {"distBinX": draw.randrange(1, bins + 1)}}
        ]
        ueid = gnb_du_ueid(n, f"02:00:00:00:{n // 256:02x}:{n % 256:02x}")
        items.append({"ueID": ueid, "measReport": body})
    value = {
        "indicationMessage-formats": ("indicationMessage-Format3", {"ueMeasReportList": items})
    }
    data = codec_for(KpmVersion.V3_00).encode(KpmPdu.MESSAGE, value)
    assert twins_agree(data, KpmVersion.V3_00)
    columns = fast_message.read_columns(data, KpmVersion.V3_00, NAMES)
    assert columns is not None
    assert len({labels["distBinX"] for labels in columns.varying[len(NAMES) - 1]}) == bins
