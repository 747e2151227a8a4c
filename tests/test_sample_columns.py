"""The KPI formulas on a step's columns (xapp/estimators/columns.py, kpi.py's ``…_of``) read
each sample as kpi.py reads it alone, bit for bit: whichever measurements a node sends, zeros
included; and so do the models' inputs."""

from __future__ import annotations

import dataclasses
import math
import types

import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from core.domain import Direction, KpiSample
from xapp.estimators import columns, kpi
from xapp.estimators.columns import SampleColumns, StepSamples, columns_of, paths_of
from xapp.estimators.model import KPI_COLUMNS, _row, _rows, row_columns
from xapp.estimators.said import KeptEstimates, said_numbers

# What each access's nodes may report, per direction (the CQI bins as the E2 reader keys them).
MEASURED = {
    "nr": [
        "RRU.PrbUsedDl",
        "RRU.PrbAvailDl",
        "RRU.PrbTotDl",
        "RRU.PrbUsedUl",
        "RRU.PrbAvailUl",
        "RRU.PrbTotUl",
        "CARR.AverageLayersDl",
        "CARR.WBCQIDist|distBinX=4",
        "CARR.WBCQIDist|distBinX=12",
    ],
    "wifi": [
        "WLAN.StaPhyRateDl",
        "WLAN.StaPhyRateUl",
        "WLAN.StaAirtime",
        "WLAN.ChannelUtilization",
    ],
    "lifi": ["LIFI.StaPhyRateDl", "LIFI.StaPhyRateUl"],
    "satellite": ["SAT.Whatever"],  # an access kpi.py has no formula for
}
# and what the models read besides
for _access, _names in KPI_COLUMNS.items():
    MEASURED[_access] += [n for n in _names if n not in MEASURED[_access]]
# and, rarely, counters that disagree with one another (a PHY rate or PRB count of almost
# nothing beside a real throughput; a throughput beyond any access): readings to refuse alike
extreme = st.sampled_from([5e-324, 1e-300, 2e-9, 2.5e5, 1e300])
values = st.one_of(st.just(0.0), st.floats(0.0, 300.0), st.floats(0.5, 2000.0), extreme)


@st.composite
def samples(draw: st.DrawFn) -> KpiSample:
    access = draw(st.sampled_from(sorted(MEASURED)))
    names = draw(st.lists(st.sampled_from(MEASURED[access]), unique=True))
    return KpiSample(
        f"cpe-{draw(st.integers(0, 5))}",
        access,
        draw(st.sampled_from(list(Direction))),
        10.0,
        1.0,
        throughput_mbps=draw(st.one_of(st.none(), values)),
        available=draw(st.sampled_from([None, True, False])),
        measurements={name: draw(values) for name in names},
    )


def _none(value: float) -> float | None:
    return None if math.isnan(value) else float(value)


@settings(max_examples=500, deadline=None)
@given(st.lists(samples(), max_size=30), st.data())
def test_the_formulas_on_columns_read_each_sample_as_kpi_py_does(
    step: list[KpiSample], data: st.DataObject
) -> None:
    columns = SampleColumns(step)
    utilisation = kpi.utilisations(step).tolist()
    assert [_none(u) for u in utilisation] == [kpi.utilisation(s) for s in step]
    for (access, direction), group in columns.groups.items():
        members = [s for s in step if (s.access, s.direction) == (access, direction)]
        assert group.samples == members
        # the efficiency and rate a KPI estimator may hold for each path (NaN: none)
        held = st.one_of(st.just(math.nan), st.floats(0.0, 50.0))
        efficiency = np.array(
            data.draw(st.lists(held, min_size=len(members), max_size=len(members)))
        )
        rate = np.array(data.draw(st.lists(held, min_size=len(members), max_size=len(members))))
        read = kpi.readings_of(group, efficiency, rate)
        for i, sample in enumerate(members):
            expected = kpi._reading(sample, _none(efficiency[i]), _none(rate[i]))
            assert bool(read.known[i]) == (expected is not None)
            if expected is not None:
                got = (
                    float(read.capacity[i]),
                    float(read.stddev[i]),
                    bool(read.available[i]),
                    bool(read.lower_bound[i]),
                )
                assert got == expected
        measured = [_none(v) for v in kpi.measured_wifi_efficiency_of(group).tolist()]
        assert measured == [kpi.measured_wifi_efficiency(s) for s in members]
        if access == "nr":
            rates = [_none(v) for v in kpi.measured_nr_rate_per_prb_of(group).tolist()]
            assert rates == [kpi.measured_nr_rate_per_prb(s) for s in members]


# A LiFi path that carried exactly the saturation share of its PHY rate, and one a little less.
AT_THE_LIMIT = [
    KpiSample("cpe-1", "lifi", Direction.DOWNLINK, 1.0, 1.0, carried, measurements=phy)
    for carried, phy in ((80.0, {"LIFI.StaPhyRateDl": 100.0}), (79.0, {"LIFI.StaPhyRateDl": 100.0}))
]


@settings(max_examples=300, deadline=None)
@given(st.lists(samples(), max_size=30))
@example(AT_THE_LIMIT)
def test_the_models_inputs_from_columns_are_those_of_each_sample(step: list[KpiSample]) -> None:
    for (access, direction), group in SampleColumns(step).groups.items():
        if access not in KPI_COLUMNS or direction != Direction.DOWNLINK:
            continue
        carried = ~np.isnan(group.throughput)
        members = [s for s, c in zip(group.samples, carried.tolist(), strict=True) if c]
        got = _rows(group, carried)
        expected = np.array([_row(s) for s in members], dtype=np.float64)
        assert got.shape == (len(members), len(row_columns(access)))
        if members:
            np.testing.assert_array_equal(got, expected.reshape(got.shape))


def test_a_steps_samples_carry_their_columns_and_paths_made_once() -> None:
    step = StepSamples(
        [
            KpiSample("cpe-1", "lifi", Direction.DOWNLINK, 1.0, 1.0, 5.0, measurements={}),
            KpiSample("cpe-2", "nr", Direction.UPLINK, 1.0, 1.0, 5.0, measurements={}),
        ]
    )
    assert columns_of(step) is columns_of(step)
    assert columns_of(list(step)) is not columns_of(list(step))
    assert paths_of(step) is paths_of(step)
    expected = [("cpe-1", "lifi", Direction.DOWNLINK), ("cpe-2", "nr", Direction.UPLINK)]
    assert paths_of(step) == paths_of(list(step)) == expected


# A station reported twice in one step: first without the airtime to measure its efficiency,
# then with it (the first is read with the efficiency known before it, not with the second's).
TWICE = [
    KpiSample(
        "cpe-1",
        "wifi",
        Direction.DOWNLINK,
        1.0,
        1.0,
        300.0,
        measurements={"WLAN.StaPhyRateDl": 1200.0, **airtime},
    )
    for airtime in ({}, {"WLAN.StaAirtime": 50.0})
]


@settings(max_examples=200, deadline=None)
@given(st.lists(st.lists(samples(), max_size=25), min_size=1, max_size=5))
@example([TWICE])
def test_the_kpi_estimator_on_columns_keeps_what_it_keeps_sample_by_sample(
    steps: list[list[KpiSample]],
) -> None:
    """Over steps (a path may come twice in one), the estimator reading columns keeps the
    same estimates, efficiencies, rates and volatility as the one reading sample by sample."""
    on_columns, one_by_one = kpi.KpiEstimator(), kpi.KpiEstimator()
    seen: set[tuple[str, str, Direction]] = set()
    for n, step in enumerate(steps):
        timed = [dataclasses.replace(s, time_s=float(n)) for s in step]
        on_columns.update(StepSamples(timed), float(n))
        one_by_one.update_one_by_one(timed)
        paths = sorted({(s.cpe_id, s.access, s.direction) for s in timed})
        seen.update(paths)
        assert on_columns.said_many(paths) == one_by_one.said_many(paths)
    for kept in ("_wifi_efficiency", "_nr_rate_per_prb", "_nr_downlink"):
        assert getattr(on_columns, kept).as_dict() == getattr(one_by_one, kept).as_dict()
    for path in seen:
        assert on_columns.change_variance(path) == one_by_one.change_variance(path)


def test_estimates_kept_many_at_once_are_those_kept_one_by_one() -> None:
    """``KeptEstimates.put_many`` (the models' batch) keeps what ``put`` keeps, refuses what
    ``said_numbers`` refuses, and forgets the estimates made of the numbers it replaces."""
    paths = [("cpe-1", "nr", Direction.DOWNLINK), ("cpe-2", "wifi", Direction.DOWNLINK)]
    numbers = [
        said_numbers(300.0, 20.0, 5.0, True, False),
        said_numbers(0.0, 0.0, 5.0, False, True),
    ]
    one, many = KeptEstimates("model"), KeptEstimates("model")
    for path, said in zip(paths, numbers, strict=True):
        one.put(path, said)
    many.put(paths[0], said_numbers(1.0, 1.0, 1.0, True, False))
    made = many.estimate(paths[0])  # made of the numbers about to be replaced
    many.put_many(paths, np.array(numbers))
    assert many.said_many(paths) == one.said_many(paths)
    assert many.estimate(paths[0]) == one.estimate(paths[0]) != made
    with pytest.raises(ValueError, match="stddev_mbps must be finite"):
        many.put_many(paths[:1], np.array([[1.0, 300.0, math.nan, 5.0, 1.0]]))


@settings(max_examples=100, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.integers(0, 40),
            st.one_of(st.none(), st.floats(0.0, 1e4), st.just(math.inf)),
        ),
        max_size=60,
    )
)
def test_estimates_kept_as_a_table_read_as_the_numbers_put(
    steps: list[tuple[int, float | None]],
) -> None:
    """``KeptEstimates`` (a table by slot, growing) against a dictionary of the numbers put:
    a put, a refused put (infinite), a drop (None); read one by one, as tuples and as a table,
    with paths never put among them."""
    kept, expected = KeptEstimates("kpi"), dict[tuple[str, str, Direction], tuple[float, ...]]()
    for n, (cpe, capacity) in enumerate(steps):
        path = (f"cpe-{cpe}", "nr", Direction.DOWNLINK)
        if capacity is None:
            kept.drop(path)
            expected.pop(path, None)
        elif math.isinf(capacity):
            with pytest.raises(ValueError, match="capacity_mbps must be finite"):
                kept.put_many([path], np.array([[1.0, capacity, 1.0, float(n), 1.0]]))
        else:
            said = said_numbers(capacity, capacity / 10, float(n), n % 3 > 0, n % 5 == 0)
            if n % 2:
                kept.put(path, said)
            else:
                kept.put_many([path], np.array([said]))
            expected[path] = said
    paths = [(f"cpe-{cpe}", "nr", Direction.DOWNLINK) for cpe in range(45)]
    assert [kept.said(path) for path in paths] == [expected.get(path) for path in paths]
    numbers = [expected.get(path, (0.0, 0.0, 0.0, 0.0, 0.0)) for path in paths]
    assert kept.said_many(paths) == numbers
    np.testing.assert_array_equal(kept.said_rows(paths), np.array(numbers).reshape(-1, 5))


_numbers = st.one_of(
    st.none(),
    st.floats(allow_nan=True, allow_infinity=True),
    st.integers(-(10**6), 10**6),
    st.sampled_from([0.0, -0.0, 5e-324]),
)


@st.composite
def _any_samples(draw: st.DrawFn) -> list[KpiSample]:
    names = ["a", "b", "CARR.WBCQIDist|distBinX=4"]
    out = []
    for i in range(draw(st.integers(0, 30))):
        values = {
            name: draw(st.one_of(st.floats(allow_nan=True), st.integers(-5, 5)))
            for name in names
            if draw(st.booleans())
        }
        measurements = types.MappingProxyType(values) if draw(st.booleans()) else values
        out.append(
            KpiSample(
                f"cpe-{i}",
                draw(st.sampled_from(["nr", "wifi", "lifi"])),
                draw(st.sampled_from(list(Direction))),
                draw(st.one_of(st.floats(0.0, 1e9), st.integers(0, 10**6))),
                1.0,
                throughput_mbps=draw(_numbers),
                available=draw(st.sampled_from([None, True, False])),
                measurements=measurements,
            )
        )
    return out


@pytest.mark.skipif(columns._core is None, reason="the C core is not built (test_sample_rows)")
@settings(max_examples=300, deadline=None)
@given(_any_samples())
def test_the_c_reading_of_a_step_is_the_python_one(step: list[KpiSample]) -> None:
    """xapp/_samples.c groups a step's samples and reads their fields and measurements as
    the generator expressions do: the same groups in the same order with the same members and
    places, the same doubles (None and absent as NaN, integers as floats; the times too), from
    dictionaries and from other mappings alike."""
    compiled = SampleColumns(step)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(columns, "_core", None)
        plain = SampleColumns(step)
        plain_columns = {
            key: {name: group.column(name) for name in ("a", "b", "CARR.WBCQIDist|distBinX=4", "z")}
            for key, group in plain.groups.items()
        }
        plain_times = {key: group.time_s for key, group in plain.groups.items()}
    assert list(compiled.groups) == list(plain.groups)
    for key, group in compiled.groups.items():
        other = plain.groups[key]
        assert [id(s) for s in group.samples] == [id(s) for s in other.samples]
        np.testing.assert_array_equal(compiled.places[key], plain.places[key])
        assert compiled.places[key].dtype == plain.places[key].dtype
        np.testing.assert_array_equal(group.throughput, other.throughput)
        np.testing.assert_array_equal(group.down, other.down)
        np.testing.assert_array_equal(group.time_s, plain_times[key])
        for name, expected in plain_columns[key].items():
            np.testing.assert_array_equal(group.column(name), expected)


_bins = st.sampled_from(
    [f"{kpi.CQI_BINS}{n}" for n in (1, 4, 12, 16)] + [f"{kpi.CQI_BINS}x", "CARR.AverageLayersDl"]
)


@settings(max_examples=300, deadline=None)
@given(
    st.lists(
        st.dictionaries(_bins, st.one_of(st.floats(allow_nan=True), st.integers(-3, 40))),
        max_size=12,
    )
)
def test_the_cqi_of_each_sample_read_from_the_bins_columns_is_reported_cqi(
    reported: list[dict[str, float]],
) -> None:
    """One bin per sample (the E2 reader's) is read from the columns, whatever the order of
    the measurements; several bins, or a bin not named by a number, as ``reported_cqi`` reads
    the sample (and a bin it would read that is not a number raises there alike)."""
    step = [
        KpiSample(f"cpe-{i}", "nr", Direction.DOWNLINK, 1.0, 1.0, 5.0, measurements=m)
        for i, m in enumerate(reported)
    ]
    if not step:
        return
    (group,) = SampleColumns(step).groups.values()
    try:
        expected = [kpi.reported_cqi(m) for m in reported]
    except ValueError:
        with pytest.raises(ValueError, match="invalid literal"):
            kpi.reported_cqis_of(group)
        return
    np.testing.assert_array_equal(
        kpi.reported_cqis_of(group),
        np.array([math.nan if c is None else c for c in expected], dtype=np.float64),
    )


@settings(max_examples=300, deadline=None)
@given(
    st.lists(
        st.dictionaries(
            st.sampled_from([f"{kpi.CQI_BINS}{n}" for n in (0, 1, 2, 4, 12, 15, 16, 30)]),
            st.integers(0, 40),
            max_size=2,
        ).flatmap(
            lambda bins: st.one_of(
                st.just(bins),
                st.floats(-3.0, 9.0).map(lambda layers: {**bins, "CARR.AverageLayersDl": layers}),
                st.sampled_from([0.5, 1.5, 2.5, -0.0, 0.0, 0.4]).map(
                    lambda layers: {**bins, "CARR.AverageLayersDl": layers}
                ),
            )
        ),
        min_size=1,
        max_size=12,
    )
)
def test_each_samples_channel_read_from_the_columns_is_channel_product(
    reported: list[dict[str, float]],
) -> None:
    """What a resource element carries on each NR downlink's channel (``nr_channel``: the CQI's
    efficiency × its layers, rounded half to even, 1 where absent or rounded to 0; NaN
    without a CQI), read from a fleet step's columns, is ``channel_product`` of each
    sample's KPIs, bit for bit: the KPI estimator keeps it rather than the KPIs."""
    step = [
        KpiSample(f"cpe-{i}", "nr", Direction.DOWNLINK, 1.0, 1.0, 5.0, measurements=m)
        for i, m in enumerate(reported)
    ]
    (group,) = SampleColumns(step).groups.values()
    expected = np.array([kpi.channel_product(m) for m in reported], dtype=np.float64)
    np.testing.assert_array_equal(kpi.channel_products_of(group), expected)
