"""Numbers the README states that the code decides: they must agree."""

from __future__ import annotations

import re
from pathlib import Path

from core.deployment import PolicySettings
from xapp.policy.hysteresis import Hysteresis

README = (Path(__file__).resolve().parents[1] / "README.md").read_text()


def test_the_push_threshold_in_the_readme_is_the_codes() -> None:
    stated = re.search(r"reaches (\d+(?:\.\d+)?) % \(`policy\.min_gain`\)", README)
    assert stated is not None, "the README names the push threshold"
    percent = float(stated.group(1))
    assert percent == Hysteresis().min_gain * 100
    assert percent == PolicySettings().min_gain * 100
