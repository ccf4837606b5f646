"""How much the quality gate's figure moves when one recipe is retrained on one data set.

    python bench/gate_spread.py --target power --seeds 5 --trials 10

Each seed is one retrain of the main job's recipe on the same rows: an Optuna study (TPE,
seeded; the default trial first) over CatBoost on the leave-one-GPU-out objective, then the
out-of-fold LOGO predictions of the best parameters, scored as the gate scores a version
(``gate.logo_mdape``: MdAPE over every held-out row). Nothing is logged. It prints each seed's
figure, their spread (max - min) and standard deviation, with the date, the machine and the
command; ``gate.TOLERANCE_PP`` is sized from the spread (docs/operations.md says how).
"""

from __future__ import annotations

import argparse
import datetime as dt
import statistics
import sys
import time

from benchinfo import add_data_arguments, load_measured, machine

from wattgpu.lifecycle.gate import TOLERANCE_PP, logo_mdape
from wattgpu.lifecycle.tuning import tune_params
from wattgpu.modeling.learning.evaluation import out_of_fold
from wattgpu.modeling.learning.recipe import recipe_of
from wattgpu.modeling.physical.targets import TARGETS, rows_with_target


def retrain(target: str, rows, trials: int, seed: int) -> float:  # noqa: ANN001 - a DataFrame
    """One retrain with ``seed``: the gate's figure of its best parameters."""
    recipe = recipe_of(target)  # the main job's (full) recipe
    params = tune_params(recipe, rows, trials=trials, seed=seed)
    return logo_mdape(out_of_fold(recipe, rows, "LOGO", params, seed=seed))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--target", choices=TARGETS, default="power")
    parser.add_argument("--seeds", type=int, default=5, help="retrains, seeds 0..N-1")
    parser.add_argument("--trials", type=int, default=10, help="trials per study (main's default)")
    add_data_arguments(parser)
    args = parser.parse_args()
    _, features, _, files = load_measured(args)
    rows = rows_with_target(args.target, features)
    print(f"# gate spread, {dt.datetime.now(dt.UTC):%Y-%m-%d %H:%M} UTC")
    print(f"machine: {machine()}")
    print(f"command: python bench/{' '.join(['gate_spread.py', *sys.argv[1:]])}")
    gpus = rows["gpu"].nunique()
    print(f"data: {len(files)} file(s), {len(rows)} {args.target} rows, {gpus} GPUs")
    print("\n| seed | LOGO MdAPE % | seconds |\n|---|---|---|")
    figures = []
    for seed in range(args.seeds):
        started = time.perf_counter()
        figures.append(retrain(args.target, rows, args.trials, seed))
        print(f"| {seed} | {figures[-1]:.3f} | {time.perf_counter() - started:.0f} |", flush=True)
    spread = max(figures) - min(figures)
    sd = statistics.stdev(figures) if len(figures) > 1 else float("nan")
    print(
        f"\n{args.target}: LOGO MdAPE over {len(figures)} retrains: min {min(figures):.3f} %, "
        f"max {max(figures):.3f} %, spread {spread:.3f} pp, sd {sd:.3f} pp; "
        f"gate tolerance {TOLERANCE_PP} pp"
    )


if __name__ == "__main__":
    main()
