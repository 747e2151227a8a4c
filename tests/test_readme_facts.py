"""The README is for users: short, with the system's figure, the two Quick start commands and
links that lead somewhere; neither it nor the guides carry issue numbers or work history. And
numbers the documents state that the code decides must agree with the code."""

from __future__ import annotations

import re
from pathlib import Path

from core.deployment import PolicySettings
from xapp.policy.hysteresis import Hysteresis

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text()
ARCHITECTURE = (ROOT / "docs" / "architecture.md").read_text()
USER_DOCUMENTS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


def test_the_readme_is_short_with_the_figure_the_quick_start_and_the_guides() -> None:
    assert len(README.splitlines()) <= 130, "about two screens"
    assert "```mermaid" in README
    quick = README.split("## Quick start", 1)[1].split("\n## ", 1)[0]
    commands = re.findall(r"^(make \w+)", quick, re.MULTILINE)
    assert commands == ["make demo", "make test"]
    for guide in ("docs/deploy.md", "docs/operator.md", "docs/models.md", "docs/results.md"):
        assert f"]({guide})" in README, guide
    assert "## Limits" in README


def test_every_relative_link_in_the_readme_and_the_guides_leads_to_a_file() -> None:
    for document in USER_DOCUMENTS:
        for target in re.findall(r"\]\(([^)]+)\)", document.read_text()):
            if target.startswith(("http://", "https://", "#", "mailto:")):
                continue
            path = (document.parent / target.split("#", 1)[0]).resolve()
            assert path.exists(), f"{document.name}: {target}"


def test_no_issue_numbers_or_work_history_in_the_readme_or_the_guides() -> None:
    for document in USER_DOCUMENTS:
        text = document.read_text()
        assert not re.search(r"(?<![\w/])#\d+\b", text), document.name
        assert not re.search(r"\bissues?\b", text, re.IGNORECASE), document.name


def test_the_push_threshold_in_the_documents_is_the_codes() -> None:
    stated = re.search(r"reaches (\d+(?:\.\d+)?) % \(`policy\.min_gain`\)", ARCHITECTURE)
    assert stated is not None, "docs/architecture.md names the push threshold"
    percent = float(stated.group(1))
    assert percent == Hysteresis().min_gain * 100
    assert percent == PolicySettings().min_gain * 100
