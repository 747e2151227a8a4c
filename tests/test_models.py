"""Training data rules, features, the training pipeline end to end, and the shipped models."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from models.data import DataError, load
from models.features import (
    GROUP,
    RAW_COLUMNS,
    REFERENCE,
    SATURATED,
    STORED_FROM_RESOURCES,
    STORED_REFERENCE,
    THROUGHPUT,
    TIME,
    _nan_mean,
    _nan_std,
    build_features,
    feature_names,
    features_from_blocks,
    features_from_columns,
    references_of_rows,
)
from models.runtime import SHIPPED, ModelError, OnnxCapacityModel
from models.train import TrainingError, train
from tests.helpers import sharing

RACA = Path(__file__).resolve().parents[2] / "shared" / "datasets" / "raca5g-download"
HEADER = "Timestamp,Speed,CellID,NetworkMode,RSRP,RSRQ,SNR,CQI,RSSI,DL_bitrate,UL_bitrate,State\n"


def trace(tmp_path: Path, name: str, rows: list[str]) -> Path:
    path = tmp_path / name
    path.write_text(HEADER + "".join(r + "\n" for r in rows))
    return path


def row(
    second: int, dl: str = "50000", rsrp: str = "-90", mode: str = "5G", state: str = "D"
) -> str:
    return f"2020.01.01_10.00.{second:02d},10,7,{mode},{rsrp},-10,12,11,-70,{dl},100,{state}"


def test_history_features_use_only_earlier_periods_of_the_same_group() -> None:
    frame = pd.DataFrame(
        {
            GROUP: ["a", "a", "a", "b", "b"],
            TIME: [0, 1, 2, 0, 1],
            THROUGHPUT: [10.0, 20.0, 30.0, 100.0, 200.0],
        }
    )
    features = build_features(frame, "lifi")
    last = features[:, feature_names("lifi").index(REFERENCE)]
    assert np.isnan(last[0])
    assert np.isnan(last[3])
    assert list(last[[1, 2, 4]]) == [10.0, 20.0, 100.0]
    mean3 = features[:, feature_names("lifi").index("ref_mean3_ratio")]
    assert mean3[2] == pytest.approx(15.0 / 20.0)


def test_the_reference_is_what_the_resources_allow_not_what_the_weights_let_through() -> None:
    """The same NR and Wi-Fi paths carried fully and held back to 30 %: the features agree.

    A throughput-history model reads a held-back path as a slow one and keeps it held back."""
    rng = np.random.default_rng(1)
    capacity = 200.0
    rows: dict[str, list[object]] = {GROUP: [], TIME: [], THROUGHPUT: []}
    nr_columns: dict[str, list[float]] = {"prb_used": [], "prb_avail": [], "prb_tot_pct": []}
    wifi_columns: dict[str, list[float]] = {"airtime_pct": [], "channel_util_pct": []}
    for group, utilisation in (("full", 1.0), ("held", 0.3)):
        for t in range(4):
            share = 0.6  # the UE could have 60 % of the PRBs (and of the airtime)
            rows[GROUP].append(group)
            rows[TIME].append(t)
            rows[THROUGHPUT].append(capacity * utilisation * (1 + 0.01 * rng.standard_normal()))
            nr_columns["prb_used"].append(round(133 * share * utilisation))
            nr_columns["prb_avail"].append(133.0)
            nr_columns["prb_tot_pct"].append(100 * (share * utilisation + 1 - share))
            wifi_columns["airtime_pct"].append(100 * share * utilisation)
            wifi_columns["channel_util_pct"].append(100 * (share * utilisation + 1 - share))
    for access, extra in (("nr", nr_columns), ("wifi", wifi_columns)):
        frame = pd.DataFrame({**rows, **extra, "saturated": [1.0] * 4 + [0.0] * 4})
        features = build_features(frame, access)
        reference = features[:, feature_names(access).index(REFERENCE)]
        assert reference[1:4] == pytest.approx([capacity] * 3, rel=0.03), access
        assert reference[5:8] == pytest.approx([capacity] * 3, rel=0.03), access
        from_resources = features[:, feature_names(access).index("ref_from_resources")]
        assert list(from_resources[5:8]) == [1.0, 1.0, 1.0]
    # Without resource KPIs, a held-back throughput is no reference at all
    bare = pd.DataFrame({**rows, "saturated": [1.0] * 4 + [0.0] * 4})
    reference = build_features(bare, "wifi")[:, feature_names("wifi").index(REFERENCE)]
    assert np.isnan(reference[5:8]).all()
    assert reference[1:4] == pytest.approx([capacity] * 3, rel=0.03)


def test_loading_rules_are_applied_and_counted(tmp_path: Path) -> None:
    rows = [
        row(0),
        row(1, dl="-"),
        row(2),
        row(2, dl="70000"),
        row(3, rsrp="-200"),
        row(4, mode="LTE"),
        row(5, state="I"),
    ]
    frame, report = load([trace(tmp_path, "t.csv", rows)], "nr")
    assert list(frame[THROUGHPUT]) == [
        50.0,
        70.0,
        50.0,
    ]  # '-' dropped, repeat: last kept, LTE/idle dropped
    assert np.isnan(frame["rsrp_dbm"].iloc[2])
    assert report.counts["repeated Timestamp → last row kept"] == 1
    assert report.counts["RSRP out of range → missing"] == 1
    assert report.counts["no DL_bitrate → row dropped"] == 1
    assert any("column Timestamp" in w for w in report.warnings)
    assert any("column RSRP" in w for w in report.warnings)


def test_bad_files_are_named_with_their_column(tmp_path: Path) -> None:
    no_snr = tmp_path / "no_snr.csv"
    no_snr.write_text(
        "Timestamp,NetworkMode,State,DL_bitrate,RSRP,RSRQ,CQI,RSSI\n2020.01.01_10.00.00,5G,D,1,-90,-10,10,-70\n"
    )
    with pytest.raises(DataError, match=r"no_snr\.csv: column SNR is missing"):
        load([no_snr], "nr")
    other = tmp_path / "other.csv"
    other.write_text("a,b\n1,2\n")
    with pytest.raises(DataError, match=r"other\.csv: neither a G-NetTrack trace"):
        load([other], "nr")
    bad_time = trace(
        tmp_path, "bad_time.csv", [r.replace("2020.01.01_", "Jan-") for r in [row(0), row(1)]]
    )
    with pytest.raises(DataError, match="column Timestamp: no value"):
        load([bad_time], "nr")
    with pytest.raises(DataError, match="train nr models, not wifi"):
        load([trace(tmp_path, "t.csv", [row(0)])], "wifi")
    with pytest.raises(DataError, match="no such file"):
        load([tmp_path / "missing.csv"], "nr")


def test_too_few_groups_for_the_folds(tmp_path: Path) -> None:
    frame, report = load(
        [trace(tmp_path, f"t{i}.csv", [row(s) for s in range(30)]) for i in range(2)], "nr"
    )
    with pytest.raises(TrainingError, match=r"2 groups .* for 4 folds"):
        train(frame, "nr", report, folds=4, quick=True)


@pytest.fixture(scope="module")
def trained(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A small model trained end to end by the command (4 static traces, quick candidates)."""
    out = tmp_path_factory.mktemp("model")
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "atsss",
            "train",
            "--access",
            "nr",
            "--data",
            str(RACA / "static"),
            "--folds",
            "4",
            "--quick",
            "--out",
            str(out),
            "--json",
        ],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr
    return out


@sharing("trained")
def test_training_end_to_end_beats_both_baselines(trained: Path) -> None:
    card = json.loads((trained / "nr.card.json").read_text())
    cv = card["cross_validation"]
    chosen = cv[card["chosen"]]
    assert chosen["r2"] > cv["linear"]["r2"]
    assert chosen["r2"] > cv["gbt-issue-baseline"]["r2"]
    assert [f["name"] for f in card["features"]] == feature_names("nr")
    assert all(part["parity_worst_relative"] <= 1e-4 for part in card["onnx"].values())
    assert card["data"]["rules_applied"]["repeated Timestamp → last row kept"] > 0
    assert 0.5 < card["interval"]["coverage"] <= 1.0


@sharing("trained")
def test_eval_command_and_report(trained: Path, tmp_path: Path) -> None:
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "atsss",
            "train",
            "eval",
            "--model",
            str(trained / "nr.card.json"),
            "--data",
            str(RACA / "driving" / "B_2019.12.16_07.22.43.csv"),
            "--report",
            str(tmp_path / "r"),
            "--json",
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert result["rows"] > 1000
    assert result["r2"] > 0.3
    page = (tmp_path / "r" / "report.md").read_text()
    assert "R²" in page
    assert "over_time.png" in page
    assert (tmp_path / "r" / "predicted_vs_measured.png").stat().st_size > 1000


@sharing("trained")
def test_runtime_refuses_a_card_that_drifted_from_the_features(
    trained: Path, tmp_path: Path
) -> None:
    for item in trained.iterdir():
        shutil.copy(item, tmp_path / item.name)
    card = json.loads((tmp_path / "nr.card.json").read_text())
    card["features"] = card["features"][1:]
    (tmp_path / "nr.card.json").write_text(json.dumps(card))
    with pytest.raises(ModelError, match=r"differ from models/features\.py"):
        OnnxCapacityModel(tmp_path / "nr.card.json")


@pytest.mark.parametrize("access", ["nr", "wifi", "lifi"])
def test_shipped_models_load_and_predict(access: str) -> None:
    model = OnnxCapacityModel.shipped(access)
    assert model.card["access"] == access
    frame = pd.DataFrame(
        {GROUP: ["x"] * 6, TIME: range(6), THROUGHPUT: [10.0, 12.0, 11.0, 13.0, 12.0, 12.5]}
    )
    prediction = model.predict(build_features(frame, access))
    assert prediction.estimate_mbps.shape == (6,)
    # nothing came before the first period: no reference to scale, no prediction
    assert np.isnan(prediction.estimate_mbps[0])
    assert np.isfinite(prediction.estimate_mbps[1:]).all()
    assert np.all(prediction.lower_mbps[1:] <= prediction.estimate_mbps[1:])
    assert np.all(prediction.estimate_mbps[1:] <= prediction.upper_mbps[1:])
    for part in model.card["onnx"].values():
        assert part["parity_worst_relative"] <= model.card["parity_rtol"]


def test_eval_notices_swapped_bounds_and_data_without_targets(tmp_path: Path) -> None:
    """Before: the shipped model with its lower/upper files swapped gave "coverage 1.7 %",
    and NaN targets "0 rows, R² nan", both with exit 0."""
    for item in SHIPPED.glob("nr.*"):
        shutil.copy(item, tmp_path / item.name)
    card = json.loads((tmp_path / "nr.card.json").read_text())
    card["onnx"]["lower"], card["onnx"]["upper"] = card["onnx"]["upper"], card["onnx"]["lower"]
    (tmp_path / "nr.card.json").write_text(json.dumps(card))
    data = RACA / "driving" / "B_2019.12.16_07.22.43.csv"
    swapped = evaluate_cli(tmp_path / "nr.card.json", data)
    assert swapped.returncode == 2
    assert "look swapped" in swapped.stderr
    no_targets = tmp_path / "nan.csv"
    frame = pd.read_csv(data)
    frame["DL_bitrate"] = float("nan")
    frame.to_csv(no_targets, index=False)
    empty = evaluate_cli(SHIPPED / "nr.card.json", no_targets)
    assert empty.returncode == 2
    assert "no usable rows" in empty.stderr


def test_a_malformed_card_is_named(tmp_path: Path) -> None:
    malformed: list[object] = [{"features": []}, ["a", "list"], {"access": "nr", "features": [1]}]
    for bad in malformed:
        (tmp_path / "nr.card.json").write_text(json.dumps(bad))
        with pytest.raises(ModelError, match="not a model card"):
            OnnxCapacityModel(tmp_path / "nr.card.json")


def evaluate_cli(card: Path, data: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "atsss", "train", "eval", "--model", str(card), "--data", str(data)],
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_cards_are_strict_json_with_null_for_a_metric_that_does_not_exist() -> None:
    """R² of a constant capacity does not exist; written as NaN, jq and most JSON readers
    refuse the whole card."""
    from models.train import Metrics

    assert Metrics(float("nan"), 1.0, 0.01, 10).as_dict()["r2"] is None

    def refuse(constant: str) -> float:
        raise ValueError(f"non-standard JSON constant {constant}")

    for card in sorted(SHIPPED.glob("*.card.json")):
        json.loads(card.read_text(), parse_constant=refuse)


def test_inference_runs_on_the_calling_thread_alone() -> None:
    """onnxruntime's default is a pool of one spinning thread per core: the xApp's processing
    cost far more CPU than its wall time. Loading and running every shipped model starts no
    thread that stays (a process of its own, so no other test's threads count): the one that
    makes a model's tree tables beside the start ends once they are made."""
    script = (
        "import os, numpy as np\n"
        "from models.runtime import OnnxCapacityModel, every_table_made\n"
        "before = len(os.listdir('/proc/self/task'))\n"
        "for access in ('nr', 'wifi', 'lifi'):\n"
        "    model = OnnxCapacityModel.shipped(access)\n"
        "    width = len(model.card['features'])\n"
        "    model.predict(np.ones((5000, width), dtype=np.float32))\n"
        "assert every_table_made(timeout=100)\n"
        "model.predict(np.ones((5000, width), dtype=np.float32))\n"
        # (a joined thread leaves the kernel's list a moment after Python's join returns)
        "import time\n"
        "deadline = time.monotonic() + 10\n"
        "while len(os.listdir('/proc/self/task')) > before and time.monotonic() < deadline:\n"
        "    time.sleep(0.01)\n"
        "print(before, len(os.listdir('/proc/self/task')))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120, check=True
    )
    before, after = map(int, done.stdout.split())
    assert after == before


@settings(max_examples=60, deadline=None)
@given(
    access=st.sampled_from(["nr", "wifi", "lifi"]),
    lengths=st.lists(st.integers(1, 14), min_size=1, max_size=6),
    seed=st.integers(0, 2**32 - 1),
    interleave=st.booleans(),
)
def test_features_of_some_rows_are_those_rows_of_all(
    access: str, lengths: list[int], seed: int, interleave: bool
) -> None:
    """The estimator asks for each path's newest row only (``rows``): the same numbers as the
    features of every row, taken at those rows, whether a path's rows are together or not."""
    rng = np.random.default_rng(seed)
    groups = np.repeat(np.arange(len(lengths)), lengths)
    if interleave:  # a path's rows in time order, between other paths' rows
        groups = groups[rng.permutation(len(groups))]
    n = len(groups)
    columns = {}
    for name in (*RAW_COLUMNS[access], SATURATED, THROUGHPUT):
        values = rng.choice([0.0, 1.0, 3.0, 50.0, 250.0, np.nan], size=n) * rng.random(n)
        columns[name] = np.where(rng.random(n) < 0.2, np.nan, values)
    rows = rng.permutation(n)[: max(1, n // 3)]
    every = features_from_columns(columns, groups.astype(np.int64), access)
    some = features_from_columns(columns, groups.astype(np.int64), access, rows=rows)
    np.testing.assert_array_equal(some, every[rows])


@settings(max_examples=80, deadline=None)
@given(
    access=st.sampled_from(["nr", "wifi", "lifi"]),
    counts=st.lists(st.integers(0, 11), min_size=1, max_size=6),
    seed=st.integers(0, 2**32 - 1),
    dropped=st.integers(0, 3),
)
def test_features_from_blocks_are_those_of_the_rows_they_hold(
    access: str, counts: list[int], seed: int, dropped: int
) -> None:
    """The running estimator reads its histories in place (paths × periods × inputs, each
    path's real periods at the end of its block, NaN before them): the same numbers, bit for
    bit, as ``features_from_columns`` of the rows the blocks hold, each path's next period
    predicted; inputs the blocks lack count as unknown in both."""
    rng = np.random.default_rng(seed)
    periods = 11
    names = [THROUGHPUT, *RAW_COLUMNS[access], SATURATED]
    for _ in range(dropped):  # an input a node does not report: no column at all
        names.pop(int(rng.integers(len(names))))
    count = np.array(counts, dtype=np.int64)
    shape = (len(counts), periods, len(names))
    blocks = rng.choice([0.0, 1.0, 3.0, 50.0, 250.0, np.nan], size=shape) * rng.random(shape)
    blocks = np.where(rng.random(shape) < 0.2, np.nan, blocks)
    for path, real in enumerate(counts):
        blocks[path, : periods - real] = np.nan  # (before its first period: nothing)
    rows = [row for path, real in enumerate(counts) for row in blocks[path, periods - real :]]
    groups = [path for path, real in enumerate(counts) for _ in range(real)]
    asked = []
    for path in range(len(counts)):  # the period to predict: after each path's last
        rows.append(np.full(len(names), np.nan))
        groups.append(path)
        asked.append(len(rows) - 1)
    table = np.array(rows).reshape(len(rows), len(names))
    columns = {name: table[:, i] for i, name in enumerate(names)}
    expected = features_from_columns(
        columns, np.array(groups, dtype=np.int64), access, rows=np.array(asked)
    )
    found = features_from_blocks(blocks, tuple(names), count, access)
    np.testing.assert_array_equal(found, expected)
    # and with each period's reference kept beside its inputs, as the running estimator
    # keeps it: the window read back rather than derived again, the same bits
    references = references_of_rows(blocks.reshape(-1, len(names)), tuple(names), access)
    kept = np.concatenate([blocks, references.reshape(len(counts), periods, 2)], axis=2)
    with_kept = (*names, STORED_REFERENCE, STORED_FROM_RESOURCES)
    found_kept = features_from_blocks(kept, with_kept, count, access)
    np.testing.assert_array_equal(found_kept.view(np.uint32), found.view(np.uint32))


_AWKWARD = [np.nan, np.inf, -np.inf, 0.0, -0.0, 5e-324, -5e-324, 1e308, -1e308, 1.0, 3.0, 1e-300]


@settings(max_examples=200, deadline=None)
@given(
    width=st.integers(1, 12),
    rows=st.integers(1, 40),
    values=st.lists(
        st.one_of(st.sampled_from(_AWKWARD), st.floats(allow_nan=True, allow_infinity=True)),
        min_size=1,
        max_size=480,
    ),
)
def test_the_window_statistics_are_numpys_own(width: int, rows: int, values: list[float]) -> None:
    """The features' lean NaN-skipping mean and standard deviation give numpy's bits (NaN's
    and a zero's sign included), on windows cut from a wider block as the features cut them."""
    table = np.resize(np.array(values, dtype=np.float64), (rows, width + 3))
    window = table[:, :width]  # (a view with the block's stride, as the features read)
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        mean, std = np.nanmean(window, axis=1), np.nanstd(window, axis=1, ddof=1)
    with np.errstate(all="ignore"):
        got_mean, got_std = _nan_mean(window), _nan_std(window)
    np.testing.assert_array_equal(got_mean.view(np.int64), mean.view(np.int64))
    np.testing.assert_array_equal(got_std.view(np.int64), std.view(np.int64))
