"""A pytest plugin that lists, at the end of a run, every item longer than ``--slow-item-s``.

Issue 67: a slow test is seen the day it is added. A report, not a failure: a loaded machine
stretches every test. An item's time is its set-up, call and tear-down together, so a module's
fixtures count in the first test that asks for them. Under xdist the workers' reports reach the
controller, which lists them.
"""

from __future__ import annotations

import pytest

DEFAULT_SLOW_ITEM_S = 60.0


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--slow-item-s",
        type=float,
        default=DEFAULT_SLOW_ITEM_S,
        help=f"list the items longer than this many seconds at the end ({DEFAULT_SLOW_ITEM_S:g})",
    )


def pytest_configure(config: pytest.Config) -> None:
    config.pluginmanager.register(SlowItems(config.getoption("slow_item_s")), "slow-items")


class SlowItems:
    """Each item's seconds, added up from its reports; the long ones listed at the end."""

    def __init__(self, limit_s: float) -> None:
        self.limit_s = limit_s
        self.seconds: dict[str, float] = {}

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        self.seconds[report.nodeid] = self.seconds.get(report.nodeid, 0.0) + report.duration

    def pytest_terminal_summary(self, terminalreporter) -> None:  # noqa: ANN001
        slow = long_items(self.seconds, self.limit_s)
        if slow:
            terminalreporter.section(f"items over {self.limit_s:g} s (issue 67: make them shorter)")
            for nodeid, seconds in slow:
                terminalreporter.write_line(f"{seconds:7.1f} s  {nodeid}")


def long_items(seconds: dict[str, float], limit_s: float) -> list[tuple[str, float]]:
    """The items of ``seconds`` over ``limit_s``, the longest first."""
    over = [(nodeid, s) for nodeid, s in seconds.items() if s > limit_s]
    return sorted(over, key=lambda item: -item[1])
