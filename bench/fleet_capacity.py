"""A replica's capacity on measured sweeps: the most users a GPU serves within TTFT and TPOT.

On every shipped concurrency sweep of AIConfigurator's serving rows (one GPU, LLM, engine
release, format, lengths and parallelism, at 4 or more concurrencies; repeats at one concurrency
are their median), for each SLO pair (TTFT ms : TPOT ms): the measured capacity
is the most measured users at which every measured concurrency up to it meets both (0 where the
first misses), as ``wattgpu recommend --fleet`` defines a replica's capacity. Beside it, the same
read off

- ``catboost``: the models' answers with that GPU held out (CatBoost defaults, fitted on the
  family's other GPUs' rows, the prior refitted on them; as ``bench/sibling_gpu.py``);
- ``physics-prior``: the same fold's analytical prior alone;
- ``nearest-GPU copy``: the measured capacity of the same sweep on the GPU nearest in memory
  bandwidth (on the sweeps that have one), copied; ``catboost`` again on those sweeps alone, so
  that the two are compared on the same ones.

Prints, per SLO pair and method, the MdAPE over the sweeps with a measured capacity (a
predicted 0 is 100 % off), the share of all sweeps whose capacity lands within one measured step
(the same measured concurrency or a neighbour), and the share predicted above the measured one.

    python bench/fleet_capacity.py [--slos 1000:30 1000:50 2000:30 2000:50]
"""

from __future__ import annotations

import argparse
import datetime as dt
import shlex
import sys
import time
from collections.abc import Sequence

import numpy as np
import pandas as pd
from benchinfo import add_data_arguments, load_measured, machine

from wattgpu.modeling.learning.evaluation import predict_folds
from wattgpu.modeling.learning.recipe import recipe_of
from wattgpu.modeling.learning.splits import source_family
from wattgpu.modeling.physical.prior import refit_prior_for
from wattgpu.modeling.physical.targets import rows_with_target

SOURCE = "aiconfigurator"
# What makes one sweep: everything but the concurrency (the shipped rows are all aggregated
# serving).
SWEEP = (
    "gpu",
    "model",
    "engine",
    "engine_version",
    "dtype",
    "input_tokens",
    "output_tokens",
    "num_gpus",
    "tensor_parallel",
    "pipeline_parallel",
    "attention_dp",
    "moe_tensor_parallel",
    "moe_expert_parallel",
)
MIN_LEVELS = 4
METHODS = {"pred": "catboost", "prior": "physics-prior", "copy": "nearest-GPU copy"}


def held_out(rows: pd.DataFrame, target: str) -> pd.DataFrame:
    """Every row answered with its GPU held out: one fold per GPU of the family."""
    gpus = rows["gpu"].to_numpy()
    folds = [(np.flatnonzero(gpus != g), np.flatnonzero(gpus == g)) for g in np.unique(gpus)]
    oof = predict_folds(
        recipe_of(target), rows, folds, [None] * len(folds), prepare=refit_prior_for(target)
    )
    return oof[["true", "pred", "prior"]].reset_index(drop=True)


def answered(family: pd.DataFrame) -> pd.DataFrame:
    """One row per (sweep, concurrency): measured and held-out TPOT and TTFT, ms (medians)."""
    frame = family[[*SWEEP, "concurrency"]].reset_index(drop=True)
    for target in ("itl", "ttft"):
        rows = rows_with_target(target, family).reset_index(drop=True)
        if len(rows) != len(family):
            sys.exit(f"{target}: {len(family) - len(rows)} rows lack a measurement")
        found = held_out(rows, target) * 1000.0  # s -> ms
        frame = frame.join(found.add_prefix(f"{target}_"))
    keys = [*SWEEP, "concurrency"]
    return frame.groupby(keys, dropna=False, sort=True).median().reset_index()


def capacities(levels: pd.DataFrame, ttft_ms: float, tpot_ms: float) -> pd.DataFrame:
    """Per sweep (4+ levels): the capacity by each reading, as users and as a level index."""
    out = []
    for key, sweep in levels.groupby(list(SWEEP), dropna=False, sort=False):
        if len(sweep) < MIN_LEVELS:
            continue
        users = sweep["concurrency"].to_numpy(float)
        row = dict(zip(SWEEP, key, strict=True))
        for name in ("true", "pred", "prior"):
            meets = (sweep[f"ttft_{name}"] <= ttft_ms) & (sweep[f"itl_{name}"] <= tpot_ms)
            step = _last_of_first_run(meets.to_numpy(bool))
            row[name] = users[step] if step >= 0 else 0.0
            row[f"{name}_step"] = step
        row["levels"] = users
        out.append(row)
    return pd.DataFrame(out)


def _last_of_first_run(meets: np.ndarray) -> int:
    """The index of the last True of the leading run of Trues (-1 where the first is False)."""
    missed = np.flatnonzero(~meets)
    return (missed[0] if len(missed) else len(meets)) - 1


def with_copies(sweeps: pd.DataFrame, bandwidth: pd.Series) -> pd.DataFrame:
    """Each sweep's nearest-GPU copy: the same sweep's measured capacity on the nearest GPU."""
    same = [c for c in SWEEP if c != "gpu"]
    copies, steps = [], []
    for row in sweeps.to_dict("records"):
        mates = sweeps
        for column in same:
            value = row[column]
            mates = mates[mates[column].isna()] if pd.isna(value) else mates[mates[column] == value]
        mates = mates[mates["gpu"] != row["gpu"]]
        if mates.empty:
            copies.append(np.nan)
            steps.append(np.nan)
            continue
        distance = np.abs(np.log(bandwidth[mates["gpu"]].to_numpy() / bandwidth[row["gpu"]]))
        copied = float(mates["true"].to_numpy()[np.argmin(distance)])
        copies.append(copied)
        at_or_below = np.flatnonzero(row["levels"] <= copied)
        steps.append(at_or_below[-1] if len(at_or_below) else -1)
    return sweeps.assign(copy=copies, copy_step=steps)


def score(sweeps: pd.DataFrame, method: str) -> list[str]:
    """Sweeps answered; MdAPE, within one step and above, on all and where the SLOs bind inside.

    A sweep where every measured level meets both targets is easy (its capacity is its top
    level, and any answer at or beyond it lands there): the columns "inside" keep only the
    sweeps whose measured capacity lies below the top level and above none.
    """
    part = sweeps[sweeps[method].notna()]
    top = np.array([len(levels) - 1 for levels in part["levels"]])
    inside = part[(part["true_step"] >= 0) & (part["true_step"] < top)]
    cells = [str(len(part))]
    for subset in (part, inside):
        positive = subset[subset["true"] > 0]
        errors = np.abs(positive[method] - positive["true"]) / positive["true"] * 100.0
        within = (np.abs(subset[f"{method}_step"] - subset["true_step"]) <= 1).mean()
        above = (subset[method] > subset["true"]).mean()
        cells += [f"{np.median(errors):.1f}" if len(errors) else "–", f"{within:.0%}"]
        cells += [f"{above:.0%}"]
    return [*cells[:4], str(len(inside)), *cells[4:]]


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--slos",
        nargs="+",
        default=["1000:30", "1000:50", "2000:30", "2000:50"],
        help="SLO pairs TTFT_MS:TPOT_MS",
    )
    add_data_arguments(parser)
    args = parser.parse_args(argv)
    started = time.perf_counter()
    catalog, measured, _, _ = load_measured(args)
    family = measured[source_family(measured) == SOURCE].reset_index(drop=True)
    levels = answered(family)
    bandwidth = catalog.gpus["memory_bandwidth_gb_s"].astype(float)
    print(f"# A replica's capacity on {SOURCE}'s measured sweeps, each GPU held out")
    print(f"- date: {dt.datetime.now(dt.UTC).isoformat(timespec='seconds')}")
    print(f"- machine: {machine()}")
    print(f"- command: python bench/fleet_capacity.py {shlex.join(sys.argv[1:])}".rstrip())
    print(f"- GPUs: {', '.join(sorted(set(family['gpu'])))} ({len(family)} rows)")
    print()
    print(
        "| TTFT ≤ | TPOT ≤ | sweeps | method | answered | MdAPE % | within one step | above "
        "| binding inside | MdAPE % | within one step | above |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for pair in args.slos:
        ttft_ms, tpot_ms = (float(x) for x in pair.split(":"))
        sweeps = with_copies(capacities(levels, ttft_ms, tpot_ms), bandwidth)
        copied = sweeps[sweeps["copy"].notna()]
        for method, name, part in (
            *((m, n, sweeps) for m, n in METHODS.items()),
            ("pred", "catboost, on the copy's sweeps", copied),
        ):
            cells = [f"{ttft_ms:g} ms", f"{tpot_ms:g} ms", str(len(sweeps)), name]
            print("| " + " | ".join([*cells, *score(part, method)]) + " |")
    print()
    print(
        "capacity: the most measured users with every level up to it within both targets; "
        "MdAPE over the sweeps with one > 0; 'above': predicted higher than measured (an "
        "unsafe answer); 'binding inside': the sweeps whose measured capacity is neither 0 "
        f"nor the top level. Took {time.perf_counter() - started:.0f} s."
    )


if __name__ == "__main__":
    main()
