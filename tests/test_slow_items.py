"""The report of slow items (tests/slow_items.py), on a real pytest run of a small suite."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from slow_items import long_items

HERE = Path(__file__).resolve().parent


def test_long_items_are_those_over_the_limit_longest_first():
    seconds = {"a": 61.0, "b": 59.9, "c": 120.5, "d": 60.0}
    assert long_items(seconds, 60.0) == [("c", 120.5), ("a", 61.0)]
    assert long_items(seconds, 200.0) == []


SMALL_SUITE = """
import time

import pytest


@pytest.fixture(scope="module")
def slow_fixture():
    time.sleep(2.0)


def test_pays_the_module_fixture(slow_fixture):
    pass


def test_after_it_is_quick(slow_fixture):
    pass


def test_sleeps_itself():
    time.sleep(1.6)


def test_quick():
    pass
"""


def run_small_suite(tmp_path: Path, *options: str) -> str:
    (tmp_path / "test_small.py").write_text(SMALL_SUITE)
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "slow_items", "-p", "no:cacheprovider", *options],
        cwd=tmp_path,
        env={"PYTHONPATH": str(HERE), "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stdout[-2000:]
    return done.stdout


def listed(output: str) -> list[str]:
    """The node ids under the report's heading, in its order."""
    if "items over" not in output:
        return []
    section = output.split("items over", 1)[1].splitlines()[1:]
    return [line.split("s  ", 1)[1] for line in section if "s  test_small.py::" in line]


def test_a_run_lists_the_items_over_the_limit_with_their_fixtures(tmp_path):
    out = run_small_suite(tmp_path, "-n", "0", "--slow-item-s", "1.2")
    # the module fixture's 2 s counts in the first test that asks for it, and comes first
    assert listed(out) == [
        "test_small.py::test_pays_the_module_fixture",
        "test_small.py::test_sleeps_itself",
    ]


def test_under_two_workers_the_controller_lists_them(tmp_path):
    out = run_small_suite(tmp_path, "-n", "2", "--slow-item-s", "1.2")
    assert set(listed(out)) == {
        "test_small.py::test_pays_the_module_fixture",
        "test_small.py::test_sleeps_itself",
    }


def test_nothing_is_listed_when_no_item_is_that_long(tmp_path):
    out = run_small_suite(tmp_path, "-n", "0", "--slow-item-s", "30")
    assert "items over" not in out
    assert listed(out) == []
