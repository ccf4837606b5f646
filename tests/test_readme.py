"""The README stays short (issue 66: within 200 lines), and every link of it lands somewhere."""

from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
README = (REPO / "README.md").read_text(encoding="utf-8")
MAX_LINES = 200


def slug(heading: str) -> str:
    """GitHub's anchor of a heading: lower case, punctuation dropped, spaces to hyphens."""
    kept = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return kept.replace(" ", "-")


def test_a_slug_by_hand():
    assert (
        slug("Fleets: how many of which GPU (`--fleet`)") == "fleets-how-many-of-which-gpu---fleet"
    )
    assert slug("`wattgpu recommend` in detail") == "wattgpu-recommend-in-detail"


def test_the_readme_is_within_its_length():
    assert len(README.splitlines()) <= MAX_LINES


def test_every_relative_link_of_the_readme_names_a_file_and_a_heading_it_has():
    links = re.findall(r"\]\(([^)#\s]+)(?:#([^)\s]+))?\)", README)
    relative = [(path, anchor) for path, anchor in links if "://" not in path]
    assert len(relative) >= 8
    for path, anchor in relative:
        target = REPO / path
        assert target.exists(), path
        if anchor:
            headings = re.findall(r"^#+ (.+)$", target.read_text(encoding="utf-8"), re.M)
            assert anchor in {slug(h) for h in headings}, f"{path}#{anchor}"
