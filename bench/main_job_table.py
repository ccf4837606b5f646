"""The main job's evaluation figures, as the README and docs/accuracy.md print them.

    wattgpu main && python bench/main_job_table.py

Reads each target's latest tuning run as ``wattgpu evaluate`` does (the store the other
commands use: ``$WATTGPU_HOME`` or ``MLFLOW_TRACKING_URI``) and prints one Markdown table:
MdAPE per split and the GPU-ranking τ on unseen GPUs, for the model and every baseline.
``tests/test_main_job.py`` reruns the main job and checks the LOGO column against the printed one.
"""

from __future__ import annotations

import datetime as dt
import sys

import pandas as pd
from benchinfo import machine

SPLITS = ("CV", "LOGO", "LOLO", "LOSO")


def evaluation(target: str) -> pd.DataFrame | None:
    """The target's latest evaluation table (long form), or None when it was never tuned."""
    from wattgpu.errors import ModelNotFound
    from wattgpu.lifecycle import tracking

    try:
        return tracking.load_evaluation(tracking.latest_parent_run(target))
    except ModelNotFound:
        return None


def table(frames: list[pd.DataFrame]) -> str:
    """One row per (target, method, scenario): MdAPE per split, then the LOGO GPU τ."""
    long = pd.concat(frames, ignore_index=True)
    wide = long.pivot_table(
        index=["target", "method", "scenario"], columns="split", values="mdape", sort=False
    )
    tau = long[long["split"] == "LOGO"].set_index(["target", "method", "scenario"])["gpu_tau"]
    lines = [
        "| target | method | scenario | CV MdAPE % | LOGO MdAPE % | LOLO MdAPE % | LOSO MdAPE % "
        "| LOGO GPU τ |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for key, row in wide.iterrows():
        cells = [f"{row[s]:.1f}" if s in row and pd.notna(row[s]) else "–" for s in SPLITS]
        gpu_tau = tau.get(key)
        cells.append(f"{gpu_tau:.2f}" if gpu_tau is not None and pd.notna(gpu_tau) else "–")
        lines.append("| " + " | ".join([*key, *cells]) + " |")
    return "\n".join(lines)


def main() -> None:
    from wattgpu.config import load_settings
    from wattgpu.lifecycle import tracking
    from wattgpu.modeling.physical.targets import TARGETS

    tracking.configure(load_settings().tracking_uri, must_exist=True)
    frames = [f for f in (evaluation(t) for t in TARGETS) if f is not None]
    if not frames:
        sys.exit("no evaluation found: run `wattgpu main` first")
    print(f"- date: {dt.datetime.now(dt.UTC).isoformat(timespec='seconds')}")
    print(f"- machine: {machine()}")
    print("- command: wattgpu main && python bench/main_job_table.py\n")
    print(table(frames))


if __name__ == "__main__":
    main()
