"""The live dashboard in a real browser (Debian's Chromium, driven by Playwright) against the
running service: three accesses' series for a simulated CPE, an override set from the page
reaches the xApp's state, and a screenshot for docs/."""

from __future__ import annotations

import shutil
from pathlib import Path

import httpx
import pytest
from playwright.sync_api import sync_playwright

from bench.live_system import (
    agent_process,
    start_simulator,
    start_xapp,
    wait_until,
    write_xapp_config,
)
from tests.helpers import screenshot_path
from tests.test_operator_api import OPERATOR, tokens_file

pytestmark = pytest.mark.slow

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"


def test_the_dashboard_shows_the_series_and_sets_an_override(tmp_path: Path) -> None:
    assert Path(CHROMIUM).exists(), "Debian's chromium is missing: run scripts/setup.sh"
    with agent_process(tmp_path, "proxy", "proxy", ["cpe-1"]) as proxy:
        config = write_xapp_config(
            tmp_path,
            "paper-dynamic",
            {},
            proxy.url,
            directions=["downlink"],
            operator_api={"tokens_file": str(tokens_file(tmp_path))},
        )
        xapp = start_xapp(tmp_path, config)
        simulator = start_simulator(tmp_path, "paper-dynamic", xapp.e2_port, 120)
        try:
            wait_until(lambda: proxy.weights("downlink", "cpe-1") is not None, 20, "weights")
            with sync_playwright() as playwright:
                browser = playwright.chromium.launch(
                    executable_path=CHROMIUM, args=["--no-sandbox", "--disable-gpu"]
                )
                page = browser.new_page(viewport={"width": 1400, "height": 900})
                page.goto(f"{xapp.http_url}/dashboard")
                page.fill("#token", OPERATOR)
                page.dispatch_event("#token", "change")
                for access in ("nr", "wifi", "lifi"):
                    legend = page.locator(f'#legend-capacity span[data-access="{access}"]')
                    legend.wait_for(timeout=15_000)
                    page.wait_for_function(
                        "a => { const s = document.querySelector("
                        '`#legend-capacity span[data-access="${a}"]`);'
                        " return s && /\\d/.test(s.textContent); }",
                        arg=access,
                        timeout=15_000,
                    )
                page.wait_for_timeout(6_000)  # a few seconds of series
                page.select_option('select[name="kind"]', "exclude")
                page.fill('input[name="value"]', "lifi")
                page.select_option('select[name="directions"]', "downlink")
                page.fill('input[name="reason"]', "LiFi AP under maintenance")
                page.click('#override-form button[type="submit"]')
                page.wait_for_function(
                    "() => document.querySelector('#form-result').textContent.startsWith('set ')",
                    timeout=10_000,
                )
                page.locator("#overrides tr[data-override]").wait_for(timeout=10_000)
                # every E2 node's state, as /v1/nodes has it
                page.wait_for_function(
                    "() => [...document.querySelectorAll('#nodes .node-state')]"
                    ".filter(c => c.textContent === 'active').length === 3",
                    timeout=10_000,
                )
                page.wait_for_timeout(2_000)
                screenshot = screenshot_path("dashboard.png", tmp_path)
                page.screenshot(path=str(screenshot), full_page=True)
                browser.close()
            found = httpx.get(
                f"{xapp.http_url}/v1/overrides",
                headers={"Authorization": f"Bearer {OPERATOR}"},
                timeout=5,
            ).json()
            assert [(o["kind"], o["excluded"], o["set_by"]) for o in found] == [
                ("exclude", ["lifi"], "alice")
            ]
            wait_until(
                lambda: (
                    (proxy.weights("downlink", "cpe-1") or {})["applied"]["weights"]["lifi"] == 0
                ),
                10,
                "lifi left out at the agent",
            )
        finally:
            simulator.kill()
            simulator.wait()
            xapp.terminate_within(5)
