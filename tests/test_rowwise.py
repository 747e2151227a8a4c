"""core/rowwise.py: each row's largest, least, any and all, as numpy's reductions along the
rows give them, for the tables a fleet's step keeps (thousands of rows, a few columns)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from core.rowwise import row_all, row_any, row_max, row_min

value = st.one_of(
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from([0.0, -0.0, math.nan, math.inf, -math.inf, 1.0, 5e-324]),
)
tables = st.tuples(st.integers(0, 40), st.integers(1, 5)).flatmap(
    lambda shape: hnp.arrays(np.float64, shape, elements=value)
)
masks = st.tuples(st.integers(0, 40), st.integers(0, 5)).flatmap(
    lambda shape: hnp.arrays(np.bool_, shape)
)


@given(table=tables)
def test_each_rows_largest_and_least_are_numpys(table: np.ndarray) -> None:
    with np.errstate(invalid="ignore"):
        np.testing.assert_array_equal(row_max(table), table.max(axis=1))
        np.testing.assert_array_equal(row_min(table), table.min(axis=1))
        np.testing.assert_array_equal(
            row_max(table, initial=0.0), np.max(table, axis=1, initial=0.0)
        )
        np.testing.assert_array_equal(
            row_min(table, initial=math.inf), np.min(table, axis=1, initial=math.inf)
        )
    assert row_max(table).dtype == np.float64


@given(mask=masks)
def test_each_rows_any_and_all_are_numpys(mask: np.ndarray) -> None:
    np.testing.assert_array_equal(row_any(mask), mask.any(axis=1))
    np.testing.assert_array_equal(row_all(mask), mask.all(axis=1))
    assert row_any(mask).dtype == np.bool_


def test_a_row_without_columns_has_no_largest_unless_one_is_given() -> None:
    empty = np.zeros((3, 0))
    with pytest.raises(ValueError, match="zero-size array"):
        row_max(empty)
    np.testing.assert_array_equal(row_max(empty, initial=0.0), [0.0, 0.0, 0.0])
    with pytest.raises(ValueError, match="rows × columns"):
        row_any(np.zeros(3, dtype=bool))


def test_the_input_is_left_as_it_was() -> None:
    table = np.array([[3.0, 1.0], [math.nan, 2.0]])
    before = table.copy()
    row_max(table)
    row_min(table)
    np.testing.assert_array_equal(table, before)
