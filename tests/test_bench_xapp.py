"""`atsss bench xapp` runs the real decode and decision path and prints its figures."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterable
from typing import Any

import pytest

from bench.xapp_bench import STAGES, default_periods, run_xapp_bench
from core.domain import Direction
from kpm import e2ap
from kpm.reports import decode_message
from xapp.control_loop import ControlLoop
from xapp.e2 import indications
from xapp.live import STEP_PART, LiveSettings
from xapp.policy.exploration import Exploration


def test_a_run_is_long_enough_for_the_push_budgets_to_settle() -> None:
    """16 periods at 1 s (the histories fill over eleven); 10 s of periods at shorter ones,
    where 16 would end while the push limit's budgets are still filling."""
    assert default_periods(1.0) == 16
    assert default_periods(0.1) == 100
    assert default_periods(0.01) == 1000


def test_a_run_may_last_longer_than_the_site_s_default_half_minute() -> None:
    """40 periods of 1 s: the site is made as long as the run (it was 30 s whatever the run,
    and a longer one ended in an IndexError)."""
    row = run_xapp_bench(5, periods=40)
    assert row.decisions == 5 * 2 * 40


def test_every_cpe_is_decoded_and_decided_for() -> None:
    # (a run before: the process's first indications build the codecs' tables, a dozen ms
    # that tests run before in the same process had paid, and run alone it had not)
    run_xapp_bench(30, periods=1)
    row = run_xapp_bench(30, periods=2)
    assert row.cpes == 30
    assert row.indications == 3  # one per access, 30 UEs each
    # Two decisions (downlink, uplink) per CPE and period, all timed; each CPE gets weights
    # in both directions from the first period's reports.
    assert row.decisions == 30 * 2 * 2
    assert row.pushes >= 30 * 2
    assert row.decisions_per_s > 0
    assert row.decision_p50_ms <= row.decision_p99_ms
    assert row.ue_reports_per_s > 0
    # cores: the larger of the wall time and the process's CPU time (every thread's) a
    # period takes; a thread pool of some library's shows in the second
    assert row.period_cpu_s > 0
    assert row.cores_needed == max(row.period_busy_s, row.period_cpu_s) / 1.0
    # every stage of the path ran, and the stages fit in the busy time (the first period,
    # with its warm-up, makes the mean per period up to twice the median)
    assert list(row.stage_ms) == list(STAGES)
    assert all(ms > 0 for ms in row.stage_ms.values()), row.stage_ms
    assert sum(row.stage_ms.values()) <= 1000 * row.period_busy_s * 2 * 1.05
    # the readers timed for the run are the plain ones again
    assert e2ap.decode.__module__ == "kpm.e2ap"
    assert vars(indications)["decode_message"] is decode_message


def test_the_loop_is_the_service_s_with_exploration(monkeypatch: pytest.MonkeyPatch) -> None:
    """The bench decides as the service does by default: exploration of the paths known only
    from below looks at every decision (it was left out, and its cost with it)."""
    asked: list[str] = []
    plain_views, plain_end = Exploration.views, Exploration.end_raises_many

    def views(self: Exploration, cpe_id: str, *args: Any, **kwargs: Any) -> Any:
        asked.append(cpe_id)
        return plain_views(self, cpe_id, *args, **kwargs)

    def end_raises_many(
        self: Exploration, questions: Iterable[tuple[str, Direction]], *args: Any
    ) -> Any:
        questions = list(questions)  # (questions with nothing to explore, put as rows)
        asked.extend(cpe_id for cpe_id, _ in questions)
        return plain_end(self, questions, *args)

    monkeypatch.setattr(Exploration, "views", views)
    monkeypatch.setattr(Exploration, "end_raises_many", end_raises_many)
    row = run_xapp_bench(10, periods=2)
    assert len(asked) == row.decisions == 10 * 2 * 2
    assert LiveSettings(cpe_agents={}).exploration is not None  # the service's default


def test_a_step_decides_its_cpes_in_the_service_s_parts(monkeypatch: pytest.MonkeyPatch) -> None:
    """As `xapp serve` steps: the reports in, then STEP_PART CPEs decided at a time."""
    parts: list[int] = []
    plain = ControlLoop.decide

    def decide(self: ControlLoop, cpes: Any, *args: Any, **kwargs: Any) -> Any:
        parts.append(len(cpes))
        return plain(self, cpes, *args, **kwargs)

    monkeypatch.setattr(ControlLoop, "decide", decide)
    row = run_xapp_bench(STEP_PART + 20, periods=2)
    assert parts == [STEP_PART, 20] * 2
    assert row.decisions == (STEP_PART + 20) * 2 * 2


def test_the_command_prints_json_rows() -> None:
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "atsss",
            "bench",
            "xapp",
            "--cpes",
            "20",
            "--periods",
            "2",
            "--json",
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    (row,) = json.loads(done.stdout)
    assert row["cpes"] == 20
    assert set(row) >= {
        "ue_reports_per_s",
        "decision_p99_ms",
        "cores_needed",
        "resident_kib_per_cpe",
    }
    bad = subprocess.run(
        [sys.executable, "-m", "atsss", "bench", "xapp", "--cpes", "0"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert bad.returncode == 2
    assert "--cpes in 1..10000" in bad.stderr


ATSSS = (sys.executable, "-m", "atsss")


def test_replicas_each_process_their_share_of_the_cpes() -> None:
    done = subprocess.run(
        [*ATSSS, "bench", "xapp", "--cpes", "40", "--replicas", "2", "--periods", "2", "--json"],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    one, two = json.loads(done.stdout)
    assert (one["replicas"], two["replicas"]) == (1, 2)
    assert one["cpes"] == two["cpes"] == 40
    assert [r["cpes"] for r in two["rows"]] == [20, 20]
    # Every replica decided for each of its CPEs in both directions, every period.
    assert all(r["decisions"] == 20 * 2 * 2 for r in two["rows"])
    assert one["cpes_per_s"] > 0
    assert two["cpes_per_s"] > 0
