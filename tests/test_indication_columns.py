"""A Format 3 indication read as columns (`kpm.fast_message.read_columns`, then
`IndicationProcessor._samples_of_columns`) gives the samples its records give.

Two halves: the C core's columns stand for exactly the records its record reader returns
(checked in tests/test_fast_message_core.py's ``twins_agree``, on generated messages, interop
vectors and every bit flip); and here, the samples made from columns are those ``_samples``
makes from the same records, in the same order with each sample's measurements in the same
order, on drawn columns: known and unknown names, labels alike and varying per UE, values
missing and out of range, UEs of no CPE and two UEs of one CPE. Where anything is amiss the
columns are refused (None), and the message is read as records, which words it; a refusal
then must be for something the records' reading rejects or merges, or a UE of no CPE."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import bench.xapp_bench as xapp_bench
from core.domain import KpiSample
from core.scenario.e2_identities import DEFAULT_SUBSCRIBED, e2_cpes, node_name
from kpm import fast_message
from kpm.reports import IndicationColumns, records_of_columns
from xapp.e2 import indications
from xapp.e2.config import E2NodeConfig
from xapp.e2.indications import IndicationProcessor

from .test_indication_samples import INDICATION, KEYS, LABELS, NAMES, SMALL, fleet, rejections


@st.composite
def columns(draw: st.DrawFn) -> IndicationColumns:
    """A Format 3 message's columns as the core gives them."""
    names = tuple(draw(st.lists(st.sampled_from(NAMES), min_size=1, max_size=6)))
    labels = tuple(draw(st.sampled_from(LABELS)) for _ in names)
    ue_keys = tuple(draw(st.lists(st.sampled_from(KEYS[:5]), min_size=1, max_size=6)))
    value = st.one_of(
        st.just(math.nan),  # noValue
        st.floats(-50, 5000, allow_nan=False),
        st.sampled_from([0.0, 0.5, 1.0, 40.0, 12.5]),
        st.integers(0, 10**6).map(float),
    )
    values = np.array([[draw(value) for _ in names] for _ in ue_keys], dtype=np.float64).reshape(
        len(ue_keys), len(names)
    )
    varying: dict[int, tuple[dict[str, Any], ...]] = {}
    for m in draw(st.lists(st.integers(0, len(names) - 1), max_size=2, unique=True)):
        varying[m] = tuple(draw(st.sampled_from(LABELS)) for _ in ue_keys)
    return IndicationColumns(
        draw(st.sampled_from([None, 1000, 100])), names, labels, ue_keys, values, varying
    )


def measurement_orders(samples: Sequence[KpiSample]) -> list[list[str]]:
    return [list(sample.measurements) for sample in samples]


@settings(max_examples=400, deadline=None)
@given(columns(), st.sampled_from([None, 12.5]))
def test_samples_from_columns_are_those_of_their_records(
    drawn: IndicationColumns, received_s: float | None
) -> None:
    on_columns, context = fleet("per-ue", SMALL)
    on_records, _ = fleet("per-ue", SMALL)
    period_s = (drawn.granularity_ms or context.config.granularity) / 1000.0
    records = records_of_columns(drawn)
    expected = on_records._samples(context, 50.0, period_s, records, INDICATION, received_s)
    got = on_columns._samples_of_columns(context, 50.0, drawn, received_s)
    if got is None:
        # refused only for what the records' reading rejects, a UE of no CPE (whose values
        # may all be missing), or two UEs of one CPE
        cpes = [on_records._cpe_for(context.config.node, keys) for keys in drawn.ue_keys]
        assert any(rejections(on_records).values()) or None in cpes or len(set(cpes)) < len(cpes)
        return
    assert got == expected
    assert measurement_orders(got) == measurement_orders(expected)
    assert not any(rejections(on_records).values())
    assert not any(rejections(on_columns).values())


def test_a_typical_message_is_read_as_columns() -> None:
    """Every UE of a CPE, every value known and in range: the columns are taken."""
    processor, context = fleet("per-ue", SMALL)
    drawn = IndicationColumns(
        1000,
        ("DRB.UEThpDl", "DRB.UEThpUl", "CARR.WBCQIDist"),
        ({}, {}, {"distBinX": 3}),
        tuple((f"gnb-du:{i}",) for i in range(SMALL)),
        np.tile([1000.0, 500.0, 1.0], (SMALL, 1)),
        {2: tuple({"distBinX": i % 16} for i in range(SMALL))},
    )
    got = processor._samples_of_columns(context, 0.0, drawn, None)
    assert got is not None
    assert len(got) == 2 * SMALL
    assert got[0].measurements == {"DRB.UEThpDl": 1.0, "CARR.WBCQIDist|distBinX=0": 1.0}


def _processor(scenario: Any) -> IndicationProcessor:
    processor = IndicationProcessor(e2_cpes(scenario))
    for access in scenario.access_names:
        config = E2NodeConfig(
            node=node_name(access), access=access, measurements=DEFAULT_SUBSCRIBED[access]
        )
        processor.set_node(config, xapp_bench.VERSION)
    return processor


@pytest.mark.skipif(not fast_message.COMPILED, reason="the C core is not built")
def test_a_fleets_indications_read_alike_as_columns_and_as_records(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The simulator's 200-CPE site over two periods, through the whole processor: NR (a
    CQI bin per UE), Wi-Fi and LiFi read as columns give the samples the records give."""
    scenario = xapp_bench.scaled_site(200, 3)
    periods = xapp_bench.encoded_periods(scenario, 2, 1.0, 1000)
    on_columns, on_records = _processor(scenario), _processor(scenario)
    read_as_columns: list[bool] = []
    plain = fast_message.read_columns

    def watched(*args: Any) -> IndicationColumns | None:
        found = plain(*args)
        read_as_columns.append(found is not None)
        return found

    for batch in periods:
        for node, payload in batch:
            monkeypatch.setattr(indications, "read_columns", watched)
            got = on_columns.handle_payload(node, payload)
            monkeypatch.setattr(indications, "read_columns", lambda *args: None)
            expected = on_records.handle_payload(node, payload)
            # (when each arrived differs: the rest must not)
            assert [dataclasses.replace(s, received_s=None) for s in got] == [
                dataclasses.replace(s, received_s=None) for s in expected
            ]
            assert measurement_orders(got) == measurement_orders(expected)
    assert read_as_columns
    assert all(read_as_columns)
