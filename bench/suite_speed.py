"""How long the test suite takes, as the README's second command runs it.

    python bench/suite_speed.py [--repeat 1] [PYTEST ARGUMENTS ...]

Runs ``pytest`` (the README's command: two worker processes, the slow tests included) in a fresh
process from the checkout, ``--repeat`` times, and prints for each run the wall time, the CPU time
the machine spent meanwhile (on an idle machine, the suite's), pytest's summary (passed, failed,
skipped) and before it the time of one reference CatBoost fit (``main_job_speed.py``'s: compare
runs through it), with the date, the machine, the load average and the command. Extra arguments
go to pytest (``-m "not slow"`` for the fast tests). Run it on an idle machine.
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import re
import subprocess
import sys
import time

from benchinfo import REPO, machine
from main_job_speed import busy_cpu_s, reference_fit_s

# pytest's last line: "597 passed, 2 skipped in 480.12s (0:08:00)", with or without ===
SUMMARY = re.compile(r"^[= ]*(\d+ (?:passed|failed|error).*?)[= ]*$", re.MULTILINE)


def run_once(arguments: list[str]) -> tuple[float, float, str, int]:
    """One suite: (wall s, busy CPU s of the machine, pytest's summary line, its exit code)."""
    before = busy_cpu_s()
    start = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", *arguments],
        cwd=REPO,
        capture_output=True,
        text=True,
    )
    wall = time.perf_counter() - start
    cpu = busy_cpu_s() - before
    found = SUMMARY.findall(done.stdout)
    summary = found[-1] if found else "no summary: " + done.stdout.strip()[-200:]
    return wall, cpu, summary, done.returncode


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=1)
    args, pytest_arguments = parser.parse_known_args()
    print("# pytest, as the README runs it")
    print(f"date: {dt.datetime.now(dt.UTC):%Y-%m-%d %H:%M} UTC; machine: {machine()}")
    print(f"load average before: {os.getloadavg()[0]:.2f}")
    print(f"command: python bench/suite_speed.py {' '.join(sys.argv[1:])}".rstrip())
    print("| run | reference fit s | wall | machine CPU s | pytest |")
    print("|---|---|---|---|---|")
    failed = False
    for number in range(1, args.repeat + 1):
        reference = reference_fit_s()
        wall, cpu, summary, code = run_once(pytest_arguments)
        failed |= code != 0
        minutes, seconds = divmod(round(wall), 60)
        print(
            f"| {number} | {reference:.2f} | {minutes} min {seconds} s | {cpu:.0f} | {summary} |",
            flush=True,
        )
    if failed:
        sys.exit("pytest failed: the times above are not the suite's")


if __name__ == "__main__":
    main()
