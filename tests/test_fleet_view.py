"""The fleet view with 1,000 CPEs, in a real browser (Debian's Chromium, driven by Playwright)
against the live system: `xapp serve` on Redis, the simulator, one process hosting the CPEs'
agents (5 % of them hostile: down, hung, trickling, endless, flooding, wrong token) and the
proxy's agent. The table pages, sorts the CPEs that need attention first, searches, and opens a
CPE's own view; /v1/fleet says the same. A screenshot for docs/."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import httpx
import pytest
from playwright.sync_api import Page, sync_playwright

from bench.fleet import running_fleet
from bench.live_system import wait_until
from tests.helpers import screenshot_path

pytestmark = pytest.mark.slow

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
CPES = 1000


def fleet_page(api: str, token: str, **params: Any) -> dict[str, Any]:
    answer = httpx.get(
        f"{api}/v1/fleet",
        params=params,
        headers={"Authorization": f"Bearer {token}"},
        timeout=120,  # a fleet starting up keeps the xApp busy on two cores
    )
    answer.raise_for_status()
    found: dict[str, Any] = answer.json()
    return found


ROWS_JS = "rows => rows.map(r => [r.dataset.cpe, Number(r.dataset.attention)])"


def rows_shown(page: Page) -> list[tuple[str, int]]:
    found: list[tuple[str, int]] = page.eval_on_selector_all("#fleet tbody tr", ROWS_JS)
    return found


def wait_for_range(page: Page, condition: str, arg: object = None, shown: str = "") -> None:
    """The table's "1–50 of 1000" line, once it meets ``condition`` (JS, on ``text``), for
    the query whose parameters contain ``shown`` (the table says which it shows)."""
    page.wait_for_function(
        f"arg => {{ const text = document.querySelector('#fleet-range').textContent;"
        f" const shown = document.querySelector('#fleet').dataset.shown || '';"
        f" return shown.includes(arg.shown) && ({condition.replace('arg', 'arg.value')}); }}",
        arg={"value": arg, "shown": shown},
        timeout=120_000,
    )


def test_the_fleet_view_finds_the_cpes_that_need_attention(tmp_path: Path) -> None:
    assert Path(CHROMIUM).exists(), "Debian's chromium is missing: run scripts/setup.sh"
    with running_fleet(tmp_path, cpes=CPES, bad_share=0.05, period_ms=5000) as fleet:
        # agents that cannot take a push at all: their CPE's uplink is never steered
        failing_kinds = {"down", "hung", "trickle", "wrong-token"}
        must_fail = {c for c, kind in fleet.kinds.items() if kind in failing_kinds}
        assert len(must_fail) >= 30, fleet.kinds

        def whole_fleet() -> list[dict[str, Any]]:
            # by id: a stable order across the two pages of a live fleet
            first = fleet_page(fleet.api, fleet.operator_token, limit=500, sort="cpe_id")
            assert first["total"] == CPES
            assert first["summary"]["cpes"] == CPES
            rest = fleet_page(fleet.api, fleet.operator_token, offset=500, limit=500, sort="cpe_id")
            found: list[dict[str, Any]] = first["items"] + rest["items"]
            return found

        def uplink(row: dict[str, Any]) -> dict[str, Any]:
            found: dict[str, Any] = row["directions"]["uplink"]
            return found

        def settled() -> bool:
            try:
                rows = whole_fleet()
            except httpx.TimeoutException:
                return False  # busy starting the fleet: asked again
            failing = {r["cpe_id"] for r in rows if uplink(r)["agent"]["state"] == "failing"}
            held = [r for r in rows if uplink(r)["weights"]]
            return failing >= must_fail and len(held) >= 10

        wait_until(settled, 240, "every hostile agent found and some CPEs' weights held")
        rows = whole_fleet()
        assert sorted(r["cpe_id"] for r in rows) == sorted(fleet.kinds)
        worst = fleet_page(fleet.api, fleet.operator_token, limit=500)["items"]
        attention = [r["attention"] for r in worst]
        assert attention == sorted(attention, reverse=True)
        for row in rows:
            assert row["steered"] == (row["problems"] == [])
            if row["cpe_id"] in must_fail:
                assert "agent-failing" in row["problems"]
                assert not uplink(row)["weights"]
        uplink_ok = [
            r for r in rows if uplink(r)["agent"]["state"] == "ok" and uplink(r)["weights"]
        ]
        assert uplink_ok, "no CPE's own agent holds weights"

        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(
                executable_path=CHROMIUM, args=["--no-sandbox", "--disable-gpu"]
            )
            page = browser.new_page(viewport={"width": 1400, "height": 1000})
            page.goto(f"{fleet.api}/dashboard")
            page.fill("#token", fleet.operator_token)
            page.dispatch_event("#token", "change")
            wait_for_range(page, "text.endsWith('of ' + arg)", CPES)
            first_page = rows_shown(page)
            assert len(first_page) == 50
            shown = [a for _, a in first_page]
            assert shown == sorted(shown, reverse=True)  # what needs attention first
            page.click("#fleet-next")
            wait_for_range(page, "text.startsWith('51–100')", shown="offset=50&")
            shown_rows, snapshot = page.eval_on_selector(
                "#fleet",
                f"t => [({ROWS_JS})([...t.querySelectorAll('tbody tr')]),"
                " Number(t.dataset.snapshot)]",
            )
            second_page = [(cpe_id, attention) for cpe_id, attention in shown_rows]
            # the next page continues the rows of the page before it (the same snapshot): in a
            # fleet whose attention changes every second, no CPE on both pages
            before = fleet_page(fleet.api, fleet.operator_token, limit=50, snapshot=snapshot)
            assert before["snapshot"] == snapshot
            before_rows = [(r["cpe_id"], r["attention"]) for r in before["items"]]
            assert not {c for c, _ in second_page} & {c for c, _ in before_rows}
            assert max(a for _, a in second_page) <= min(a for _, a in before_rows)
            later = fleet_page(
                fleet.api, fleet.operator_token, offset=50, limit=50, snapshot=snapshot
            )
            assert [(r["cpe_id"], r["attention"]) for r in later["items"]] == second_page

            page.select_option("#fleet-problem", "agent-failing")
            wait_for_range(page, "text.startsWith('1–')", shown="problem=agent-failing")
            assert all(a >= 40 for _, a in rows_shown(page))
            page.select_option("#fleet-problem", "")

            chosen = sorted({r["cpe_id"] for r in uplink_ok})[-1]
            page.fill("#fleet-search", chosen)
            page.wait_for_function(
                "id => { const r = document.querySelectorAll('#fleet tbody tr');"
                " return r.length === 1 && r[0].dataset.cpe === id; }",
                arg=chosen,
                timeout=120_000,
            )
            page.click(f'#fleet tbody tr[data-cpe="{chosen}"]')
            assert page.eval_on_selector("#cpe", "s => s.value") == chosen
            # the CPE's own view fills in: its three accesses' estimates
            for access in ("nr", "wifi", "lifi"):
                page.locator(f'#legend-capacity span[data-access="{access}"]').wait_for(
                    timeout=120_000
                )
            page.fill("#fleet-search", "")
            wait_for_range(page, "text.endsWith('of ' + arg)", CPES)
            page.wait_for_timeout(1_000)
            screenshot = screenshot_path("fleet.png", tmp_path)
            page.screenshot(path=str(screenshot), full_page=False)
            browser.close()
