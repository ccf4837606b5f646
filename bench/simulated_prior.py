"""The simulated prior alone on the main job's splits, its terms fitted on each training side.

Every measured row's own harness is simulated once (``modeling.serving.run.simulate_rows``);
each fold fits the simulated prior's terms on its training rows
(``modeling.serving.prior.fit_terms``: per engine line, a scale on ITL and on TTFT; power's idle
share and busy weight) and answers its test rows. Printed: MdAPE % per target, scenario and
split (CV, LOGO, LOLO in blocks of LLMs, LOSO), each row scored against what its source measured
(like with like: ITL in the row's own statistic). The closed-form prior on the same folds:
``python bench/accuracy.py --methods physics-prior`` (its ITL scored against the measured ITL
converted to the median gap, as the main job scores it).

    python bench/simulated_prior.py [--data DIR] [--measurements PATH ...] [--seed N]
"""

from __future__ import annotations

import argparse
import datetime as dt
import sys
import time

import numpy as np
import pandas as pd
from benchinfo import add_data_arguments, load_measured, machine

from wattgpu.modeling.learning.evaluation import TABLE_FOLDS
from wattgpu.modeling.learning.splits import SPLITS, can_split, split_indices
from wattgpu.modeling.physical.targets import TARGETS, rows_with_target
from wattgpu.modeling.serving.prior import fit_terms, simulated_prior
from wattgpu.modeling.serving.run import simulate_rows

# target -> (the measured column a row is scored on, the simulated prior's column)
SCORED = {
    "power": ("mean_power_w", "prior_power_w"),
    "itl": ("itl_s", "prior_itl_s"),
    "ttft": ("ttft_s", "prior_ttft_s"),
}


def out_of_fold(
    data: pd.DataFrame, sim: pd.DataFrame, target: str, split: str, seed: int
) -> np.ndarray:
    """``target``'s simulated prior of ``data``'s rows, each from a fold it was held out of."""
    out = np.full(len(data), np.nan)
    for train, test in split_indices(data, TABLE_FOLDS[split], seed=seed):
        terms = fit_terms(data.iloc[train], sim.iloc[train])
        answer = simulated_prior(data.iloc[test], sim.iloc[test], terms)
        out[test] = answer[SCORED[target][1]]
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_data_arguments(parser)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    print("# The simulated prior alone, refitted per fold\n")
    print(f"- date: {dt.datetime.now().astimezone().isoformat(timespec='seconds')}")
    print(f"- machine: {machine()}")
    print(f"- command: python bench/simulated_prior.py {' '.join(sys.argv[1:])}".rstrip())
    _, rows, _, _ = load_measured(args)
    start = time.perf_counter()
    sim = simulate_rows(rows)
    print(f"- rows: {len(rows)}, simulated in {time.perf_counter() - start:.1f} s\n")
    print("| target | scenario | rows | " + " | ".join(f"{s} MdAPE %" for s in SPLITS) + " |")
    print("|---|---|---|" + "---|" * len(SPLITS))
    for target in TARGETS:
        data = rows_with_target(target, rows)
        part = sim.loc[data.index].reset_index(drop=True)
        data = data.reset_index(drop=True)
        measured = data[SCORED[target][0]].to_numpy(float)
        answers = {
            split: out_of_fold(data, part, target, split, args.seed)
            for split in SPLITS
            if can_split(data, split)
        }
        for scenario in ("offline", "server"):
            mine = (data["scenario"] == scenario).to_numpy()
            if not mine.any():
                continue
            cells = []
            for split in SPLITS:
                if split not in answers:
                    cells.append("–")
                    continue
                ape = np.abs(answers[split][mine] / measured[mine] - 1)
                cells.append(f"{100 * np.nanmedian(ape):.1f}")
            print(f"| {target} | {scenario} | {int(mine.sum())} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
