"""The shared vocabulary (core/domain.py): what its fast constructors promise."""

from __future__ import annotations

import dataclasses
import inspect

import pytest

from core.domain import Direction, KpiSample


def test_a_sample_made_fast_is_the_sample_init_makes() -> None:
    """``KpiSample.made`` (the E2 reader's) gives every field as ``__init__`` does; a field
    added to the class must be added to it, or this fails."""
    names = [f.name for f in dataclasses.fields(KpiSample)]
    assert list(inspect.signature(KpiSample.made).parameters) == names
    values = ("cpe-7", "wifi", Direction.UPLINK, 12.5, 0.1, 80.0, 3.0, 0.5, True, {"x": 1.0}, 9.0)
    fast, plain = KpiSample.made(*values), KpiSample(*values)
    assert fast == plain
    assert [(f.name, getattr(fast, f.name)) for f in dataclasses.fields(KpiSample)] == [
        (f.name, getattr(plain, f.name)) for f in dataclasses.fields(KpiSample)
    ]
    assert not hasattr(fast, "__dict__")  # (slotted: see KpiSample)
    assert hash(fast.direction) == hash(plain.direction)
    with pytest.raises(dataclasses.FrozenInstanceError):
        fast.cpe_id = "cpe-8"  # type: ignore[misc]
    assert dataclasses.replace(fast, access="nr") == dataclasses.replace(plain, access="nr")
