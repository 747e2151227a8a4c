"""`atsss xapp run` with agents: what it refuses before serving, and what it learns from them."""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from core.domain import Direction, KpiSample
from core.scenario.e2_identities import e2_cpes
from core.scenario.load import load_scenario
from kpm import e2ap
from tests.test_agent_api import TOKEN, agent, put, write_config
from xapp.adapters.agent_events import AccessEvent
from xapp.adapters.agent_http import AgentEndpoint
from xapp.estimators.selection import EstimatorSettings
from xapp.live import LiveControl, LiveSettings


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "atsss", "xapp", "run", "--scenario", "paper-static", *args],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_bad_agent_options_and_unreachable_agents_are_clear_errors() -> None:
    bad = run("--agent", "cpe-1:http://x")
    assert bad.returncode == 2
    assert "--agent is CPE=URL" in bad.stderr
    unknown = run("--agent", "cpe-7=http://127.0.0.1:1")
    assert unknown.returncode == 2
    assert "'cpe-7' is not a CPE of the scenario" in unknown.stderr
    wrong_mode = run("--agent", "cpe-1=http://127.0.0.1:1", "--estimator", "guess")
    assert wrong_mode.returncode == 2
    assert "'guess' is not one of" in wrong_mode.stderr
    unreachable = run("--agent", "cpe-1=http://127.0.0.1:1", "--duration", "1")
    assert unreachable.returncode == 2
    assert "agent at http://127.0.0.1:1" in unreachable.stderr
    assert "Traceback" not in unreachable.stderr
    waited = run("--agent", "cpe-1=http://127.0.0.1:1", "--agent-wait", "1", "--duration", "1")
    assert waited.returncode == 2
    assert "retrying for up to" in waited.stderr
    assert waited.stderr.rstrip().endswith("Connection refused")


def test_prepare_reads_the_lever_and_continues_the_agents_sequence(tmp_path: Path) -> None:
    config, port = write_config(tmp_path)
    url = f"http://127.0.0.1:{port}"
    cpes = e2_cpes(load_scenario("paper-static"))
    with agent(config, port) as client:
        assert put(client, {"nr": 3, "wifi": 10, "lifi": 1}, 41).status_code == 200
        control = LiveControl(
            cpes,
            LiveSettings(cpe_agents={}, proxy_agent=AgentEndpoint(url, TOKEN)),
        )
        try:
            levers = control.prepare()
        finally:
            control.stop()
    assert levers == {url: "weights"}
    held = control.store.load_weights("cpe-1", Direction.DOWNLINK)
    assert held is not None
    assert held.sequence == 41
    assert held.weights == {"nr": 3, "wifi": 10, "lifi": 1}
    # A weights lever keeps the policy's own floor; only active-backup raises it.
    assert control.policy_config.min_share_of_largest == 0.01


def test_prepare_waits_for_an_agent_that_comes_up_later(tmp_path: Path) -> None:
    config, port = write_config(tmp_path)
    url = f"http://127.0.0.1:{port}"
    control = LiveControl(
        e2_cpes(load_scenario("paper-static")),
        LiveSettings(cpe_agents={}, proxy_agent=AgentEndpoint(url, TOKEN)),
    )
    waits: list[str] = []
    result: dict[str, object] = {}

    def prepare() -> None:
        try:
            result["levers"] = control.prepare(wait_s=60.0, on_wait=waits.append)
        except Exception as error:  # reported below, not lost in the thread
            result["error"] = error

    thread = threading.Thread(target=prepare)
    thread.start()
    try:
        while not waits and thread.is_alive():  # it has tried and found nobody
            thread.join(timeout=0.1)
        with agent(config, port):
            thread.join(timeout=60)
    finally:
        control.stop()
    assert result.get("levers") == {url: "weights"}, result
    assert f"agent at {url}" in waits[0]
    assert "retrying for up to" in waits[0]


def test_an_agent_restarted_without_its_state_is_refilled(tmp_path: Path) -> None:
    """Before: the loop pushes only when it expects a gain, so a restarted agent that had lost
    its state file held nothing for good."""
    config, port = write_config(tmp_path)
    url = f"http://127.0.0.1:{port}"
    cpes = e2_cpes(load_scenario("paper-static"))
    settings = LiveSettings(
        cpe_agents={}, proxy_agent=AgentEndpoint(url, TOKEN), directions=(Direction.DOWNLINK,)
    )
    control = LiveControl(cpes, settings)
    try:
        with agent(config, port) as client:
            assert put(client, {"nr": 28, "wifi": 99, "lifi": 1}, 5).status_code == 200
            control.prepare()
            control.step(0.0)  # notes the agent's run
        (tmp_path / "state.json").unlink()
        with agent(config, port) as client:
            assert client.get("/v1/weights/downlink", params={"cpe_id": "cpe-1"}).status_code == 404
            control.step(10.0)
            held = client.get("/v1/weights/downlink", params={"cpe_id": "cpe-1"})
            assert held.status_code == 200, held.text
            applied = held.json()["applied"]
            assert applied["weights"] == {"nr": 28, "wifi": 99, "lifi": 1}
            assert applied["sequence"] == 6
            assert control.refills == 1
            control.step(20.0)  # same run: nothing more
            assert control.refills == 1
    finally:
        control.stop()


def test_a_cpe_taken_over_continues_the_agents_sequence_not_sdls(tmp_path: Path) -> None:
    """Before: the replica taking a CPE over decided from SDL's record, one push behind when
    the replica before died between a push and its record of it; its first push was refused
    (409: sequence 6 is not after 6)."""
    config, port = write_config(tmp_path)
    url = f"http://127.0.0.1:{port}"
    settings = LiveSettings(
        cpe_agents={}, proxy_agent=AgentEndpoint(url, TOKEN), directions=(Direction.DOWNLINK,)
    )
    mine: set[str] = set()
    control = LiveControl(e2_cpes(load_scenario("paper-static")), settings, owned=lambda: mine)
    try:
        with agent(config, port) as client:
            assert put(client, {"nr": 28, "wifi": 99, "lifi": 1}, 5).status_code == 200
            control.prepare()
            control.step(0.0)
            # The other replica's last push landed; it died before recording it.
            assert put(client, {"nr": 20, "wifi": 99, "lifi": 9}, 6).status_code == 200
            stale = control.store.load_weights("cpe-1", Direction.DOWNLINK)
            assert stale is None or stale.sequence < 6, "not ours: the agent was not asked"
            mine.add("cpe-1")
            control.step(1.0)
            held = control.store.load_weights("cpe-1", Direction.DOWNLINK)
            assert held is not None
            assert (held.sequence, dict(held.weights)) == (6, {"nr": 20, "wifi": 99, "lifi": 9})
    finally:
        control.stop()


def test_one_mainline_lever_cannot_be_given_two_directions() -> None:
    """Before: both directions went to the CPE's agent, which keeps one sequence per CPE, and
    every uplink push was refused with 409."""
    both = run("--agent", "cpe-1=http://127.0.0.1:1", "--downlink-via-cpe", "--duration", "1")
    assert both.returncode == 2
    assert "steer both directions at once" in both.stderr
    from core.deployment import Deployment

    with pytest.raises(ValueError, match="steer both directions at once"):
        Deployment.model_validate(
            {
                "e2": {"nodes": [{"name": "g", "access": "nr", "measurements": ["DRB.UEThpDl"]}]},
                "cpes": [{"id": "c", "accesses": {"nr": {"ue_id": "gnb-du:1"}}}],
                "agents": {"downlink_via_cpe": True},
            }
        )


def test_a_carrier_return_whose_event_was_missed_is_taken_from_the_agents_health(
    tmp_path: Path,
) -> None:
    config, port = write_config(tmp_path)
    url = f"http://127.0.0.1:{port}"
    endpoint = AgentEndpoint(url, TOKEN)
    cpes = e2_cpes(load_scenario("paper-static"))
    settings = LiveSettings(
        cpe_agents={"cpe-1": endpoint}, proxy_agent=endpoint, directions=(Direction.DOWNLINK,)
    )
    control = LiveControl(cpes, settings)
    try:
        with agent(config, port):
            control.prepare()
            control.on_access_event(AccessEvent(url, "wifi", False, 1, 0.0, "weight 0"))
            control.react(100.0)
            assert control.access_events == 1
            assert control.last_access_event["cpe-1"]["carrier"] == "down"
            # No "back" event comes (say the agent restarted); its health has no carrier down.
            control.step(101.0)
            assert control.carrier_down("cpe-1") == []
    finally:
        control.stop()


def timed_steps(period_s: float) -> tuple[LiveControl, list[float], threading.Event]:
    """A live loop over paper-static whose steps only note when they began (and set the
    event): the loop's timing alone, no agents."""
    control = LiveControl(
        e2_cpes(load_scenario("paper-static")),
        LiveSettings(cpe_agents={}, proxy_agent=None, period_s=period_s),
    )
    return timed_steps_of(control)


def fleet_control(period_s: float) -> LiveControl:
    """A live loop over test_decode_backlog's fleet of 1,000 CPEs on one NR node, decoding
    their indications in its own thread, without agents."""
    from tests.test_decode_backlog import fleet_cpes, fleet_processor

    control = LiveControl(
        fleet_cpes(),
        LiveSettings(
            cpe_agents={},
            proxy_agent=None,
            period_s=period_s,
            estimator=EstimatorSettings("kpi-only"),
        ),
    )
    control.source.decode_with(fleet_processor())
    control.prepare_without_waiting()
    return control


def timed_steps_of(control: LiveControl) -> tuple[LiveControl, list[float], threading.Event]:
    """``control`` with steps that only note when they began (and set the event), and no
    reactions."""
    steps: list[float] = []
    stepped = threading.Event()

    def step(now_s: float) -> list[object]:
        steps.append(time.monotonic())
        stepped.set()
        return []

    control.step = step  # type: ignore[assignment,method-assign]
    control.react = lambda now_s: []  # type: ignore[method-assign]
    return control, steps, stepped


def after_a_first_period(
    control: LiveControl, stepped: threading.Event, period_s: float
) -> list[e2ap.Indication]:
    """Feed a started loop one period in three parts, as three nodes would send them (500
    UEs, 400, 100), wait for its step and into the next period; the next period's three
    parts, to send."""
    from tests.test_decode_backlog import START, period_indication

    parts = [range(0, 500), range(500, 900), range(900, 1000)]
    first = [period_indication(START, 10.0, part) for part in parts]
    second = [period_indication(START + 1, 20.0, part) for part in parts]
    for indication in first:  # the first period, counted: three reports a period
        control.source.add_indication("gnb", indication)
    assert stepped.wait(10 * period_s), "no step after the first reports"
    time.sleep(period_s * 0.6)
    stepped.clear()
    return second


def test_a_step_follows_the_reports_not_a_timer_of_its_own() -> None:
    """Reports that come in start a step a moment later (before: they waited for the loop's
    own timer, up to a period: 230 ms median, 504 ms p99 at 1 s reports); without reports a
    step still comes every period and a half; reports close together make one step."""
    period_s = 4.0
    control, steps, stepped = timed_steps(period_s)
    control.start()
    try:
        # the timer's step (nothing reported): a period and a half after the start at most
        assert stepped.wait(10 * period_s), "no step without reports"
        stepped.clear()
        after_timer = steps[-1]
        time.sleep(period_s * 0.6)  # past the half period two steps are kept apart by
        sample = KpiSample("cpe-1", "nr", Direction.DOWNLINK, 1.0, 1.0, received_s=0.0)
        reported = time.monotonic()
        for _ in range(3):  # three nodes' reports of one period
            control.source.add([sample])
        assert stepped.wait(10 * period_s), "no step after the reports"
        assert len(steps) == 2, "reports close together made more than one step"
        # the timer would step 1.6 s after the reports; the reports' own step 25 ms after them
        assert steps[-1] - reported < period_s * 0.25, "the step waited for its timer"
        assert steps[-1] - after_timer < period_s * 1.5
    finally:
        control.stop()


def test_a_step_longer_than_half_a_period_does_not_skip_the_next_period_s_reports() -> None:
    """Reports every period and steps of 0.6 period: each period's reports get their step
    (found in review: reports that came in during a long step waited for the timer, a period
    and a half, and the loop stepped every other period)."""
    period_s = 1.0
    control = LiveControl(
        e2_cpes(load_scenario("paper-static")),
        LiveSettings(cpe_agents={}, proxy_agent=None, period_s=period_s),
    )
    steps: list[float] = []

    def step(now_s: float) -> list[object]:
        steps.append(time.monotonic())
        time.sleep(0.6 * period_s)  # a long step: agents slow to answer
        return []

    control.step = step  # type: ignore[assignment,method-assign]
    control.react = lambda now_s: []  # type: ignore[method-assign]
    sample = KpiSample("cpe-1", "nr", Direction.DOWNLINK, 1.0, 1.0, received_s=0.0)
    control.start()
    try:
        started = time.monotonic()
        for tick in range(1, 7):
            while time.monotonic() < started + tick * period_s:
                time.sleep(0.01)
            control.source.add([sample])
        deadline = time.monotonic() + 5 * period_s  # the last reports' step may still come
        while time.monotonic() < deadline and len(steps_after(started + period_s, steps)) < 6:
            time.sleep(0.02)
    finally:
        control.stop()
    after_first = steps_after(started + period_s, steps)
    assert len(after_first) >= 5, f"{len(after_first)} steps for 6 periods' reports"


def steps_after(moment: float, steps: list[float]) -> list[float]:
    return [s for s in steps if s >= moment - 0.05]


def test_a_step_waits_for_as_many_reports_as_the_last_period_brought() -> None:
    """The nodes report the same period over their own connections, some milliseconds apart:
    a step waits until as many reports have come as the last period had, not only until they
    pause (at 100 ms reports the pause is 2.5 ms: a step began after the first node's report
    and the others' waited for the next, 27 ms median from report to decision)."""
    period_s = 4.0  # a pause of 25 ms ends a gather without a count; the cap is 1 s
    control, steps, stepped = timed_steps(period_s)
    sample = KpiSample("cpe-1", "nr", Direction.DOWNLINK, 1.0, 1.0, received_s=0.0)
    control.start()
    try:
        for _ in range(3):  # the first period: three nodes at once, counted
            control.source.add([sample])
        assert stepped.wait(10 * period_s), "no step after the first reports"
        time.sleep(period_s * 0.6)  # past the half period two steps are kept apart by
        stepped.clear()
        before = len(steps)
        for _ in range(3):  # the next period: the same three, 200 ms apart
            control.source.add([sample])
            last_report = time.monotonic()
            time.sleep(0.2)
        assert stepped.wait(10 * period_s), "no step after the second period's reports"
    finally:
        control.stop()
    assert len(steps) == before + 1, "the period's reports made more than one step"
    assert steps[-1] >= last_report, "the step began before the period's last report"


def test_reports_in_before_the_periods_last_reach_the_estimators_while_it_is_awaited() -> None:
    """A node's report is decoded and fed to the estimators as it comes, while the loop waits
    for the period's other reports: after the last one only its own work is left (at 100 ms
    reports, one CPE: a mean report → agent's answer of 33 ms when built, 38 ms before)."""
    period_s = 4.0
    control, steps, stepped = timed_steps_of(fleet_control(period_s))
    fed: list[tuple[float, int]] = []  # when the estimators were fed, and how many samples
    update = control.estimator.update

    def counted_update(samples: list[KpiSample], now_s: float) -> None:
        if samples:
            fed.append((time.monotonic(), len(samples)))
        update(samples, now_s)

    control.estimator.update = counted_update  # type: ignore[assignment,method-assign]
    control.start()
    try:
        second = after_a_first_period(control, stepped, period_s)
        fed.clear()
        arrivals = []
        for indication in second:  # the next period, 300 ms apart
            control.source.add_indication("gnb", indication)
            arrivals.append(time.monotonic())
            time.sleep(0.3)
        assert stepped.wait(10 * period_s), "no step after the second period's reports"
    finally:
        control.stop()
    assert steps[-1] >= arrivals[-1], "the step began before the period's last report"
    # the first two parts reached the estimators as they came, a sample per UE and direction;
    # the last is taken as it comes or by the step (this one, a stand-in, takes nothing)
    before_step = [(at, count) for at, count in fed if at < steps[-1]]
    assert [count for _, count in before_step] in ([1000, 800], [1000, 800, 200])
    assert arrivals[0] <= before_step[0][0] < arrivals[1]
    assert arrivals[1] <= before_step[1][0] < arrivals[2]


def test_an_override_is_acted_on_while_the_loop_awaits_the_periods_last_report() -> None:
    """An operator's override that comes while the loop gathers a period's reports (a fleet's
    nodes send them over a good part of the period) is decided then, not after the step: with
    1,000 CPEs an override waited for the gather and the whole step (p99 2.4-3.5 s at 1 s
    reports in `atsss bench fleet --estimator fused`)."""
    period_s = 4.0
    control, steps, stepped = timed_steps_of(fleet_control(period_s))
    reacted: list[tuple[float, set[str]]] = []
    acted = threading.Event()

    def react(now_s: float) -> list[object]:
        with control._events_lock:
            touched, control._soon = control._soon, set()
        if touched:
            reacted.append((time.monotonic(), touched))
            acted.set()
        return []

    control.react = react  # type: ignore[assignment,method-assign]
    control.start()
    try:
        second = after_a_first_period(control, stepped, period_s)
        control.source.add_indication("gnb", second[0])  # the gather of the next period begins
        time.sleep(0.1)
        overridden_at = time.monotonic()
        control.state.on_override("cpe-0007")  # as the operator API's write calls it
        assert acted.wait(period_s), "the override was not acted on"
        for indication in second[1:]:
            control.source.add_indication("gnb", indication)
        assert stepped.wait(10 * period_s), "no step after the second period's reports"
    finally:
        control.stop()
    (at, touched), *_ = reacted
    assert touched == {"cpe-0007"}
    assert overridden_at <= at < steps[-1], "the override waited for the period's step"
