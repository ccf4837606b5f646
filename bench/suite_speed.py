"""How long the test suite takes, as the README's second command runs it.

    python bench/suite_speed.py [--repeat 1] [--longest 25] [PYTEST ARGUMENTS ...]

Runs ``pytest`` (the README's command: two worker processes, the slow tests included) in a fresh
process from the checkout, ``--repeat`` times, and prints for each run the wall time, the CPU time
the machine spent meanwhile (on an idle machine, the suite's), pytest's summary (passed, failed,
skipped) and before it the time of one reference CatBoost fit (``main_job_speed.py``'s: compare
runs through it), with the date, the machine, the load average and the command. After each run,
its ``--longest`` items and files: an item's seconds are its set-up, call and tear-down (pytest's
JUnit report), so a module's fixtures count in the first test that asks for them; a file's are
its items' together, on whichever worker ran it. Extra arguments go to pytest (``-m "not slow"``
for the fast tests). Run it on an idle machine.
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import re
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from collections import defaultdict
from pathlib import Path

from benchinfo import REPO, machine
from main_job_speed import busy_cpu_s, reference_fit_s

# pytest's last line: "597 passed, 2 skipped in 480.12s (0:08:00)", with or without ===
SUMMARY = re.compile(r"^[= ]*(\d+ (?:passed|failed|error).*?)[= ]*$", re.MULTILINE)


def run_once(arguments: list[str], report: Path) -> tuple[float, float, str, int]:
    """One suite: (wall s, busy CPU s of the machine, pytest's summary line, its exit code);
    each item's seconds written to ``report`` (JUnit XML)."""
    before = busy_cpu_s()
    start = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", f"--junitxml={report}", *arguments],
        cwd=REPO,
        capture_output=True,
        text=True,
    )
    wall = time.perf_counter() - start
    cpu = busy_cpu_s() - before
    found = SUMMARY.findall(done.stdout)
    summary = found[-1] if found else "no summary: " + done.stdout.strip()[-200:]
    return wall, cpu, summary, done.returncode


def item_seconds(report: Path) -> dict[str, float]:
    """``file::test`` -> seconds (set-up, call and tear-down) from a JUnit report."""
    seconds = {}
    for case in ET.parse(report).iter("testcase"):
        module = case.get("classname", "").split(".")[-1]
        seconds[f"{module}.py::{case.get('name')}"] = float(case.get("time", 0))
    return seconds


def file_seconds(items: dict[str, float]) -> dict[str, float]:
    """Each file's items' seconds together."""
    files: dict[str, float] = defaultdict(float)
    for name, seconds in items.items():
        files[name.split("::", 1)[0]] += seconds
    return dict(files)


def print_longest(title: str, seconds: dict[str, float], count: int) -> None:
    print(f"\n| {title} | s |\n|---|---|")
    for name, value in sorted(seconds.items(), key=lambda item: -item[1])[:count]:
        print(f"| {name} | {value:.1f} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--longest", type=int, default=25, help="items and files listed per run")
    args, pytest_arguments = parser.parse_known_args()
    print("# pytest, as the README runs it")
    print(f"date: {dt.datetime.now(dt.UTC):%Y-%m-%d %H:%M} UTC; machine: {machine()}")
    print(f"load average before: {os.getloadavg()[0]:.2f}")
    print(f"command: python bench/suite_speed.py {' '.join(sys.argv[1:])}".rstrip())
    print("| run | reference fit s | wall | machine CPU s | pytest |")
    print("|---|---|---|---|---|")
    failed = False
    longest = []
    for number in range(1, args.repeat + 1):
        reference = reference_fit_s()
        with tempfile.TemporaryDirectory() as folder:
            report = Path(folder) / "junit.xml"
            wall, cpu, summary, code = run_once(pytest_arguments, report)
            items = item_seconds(report) if report.is_file() else {}
        longest.append((number, items))
        failed |= code != 0
        minutes, seconds = divmod(round(wall), 60)
        print(
            f"| {number} | {reference:.2f} | {minutes} min {seconds} s | {cpu:.0f} | {summary} |",
            flush=True,
        )
    for number, items in longest:
        print_longest(f"run {number}: the {args.longest} longest items", items, args.longest)
        print_longest(
            f"run {number}: the {args.longest} longest files", file_seconds(items), args.longest
        )
    if failed:
        sys.exit("pytest failed: the times above are not the suite's")


if __name__ == "__main__":
    main()
