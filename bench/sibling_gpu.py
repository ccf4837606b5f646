"""A new GPU next to a measured sibling: one source's rows, one GPU held out, the rest train.

What a user of a new GPU generation sees when the engines and LLMs they run were measured on its
sibling: within one data family (``--source``, default AIConfigurator's serving rows) the rows of
``--held-out`` (default the B200) are predicted by a model fitted on the family's other GPUs (H100,
H200, GB200) with CatBoost's default settings, the analytical prior refitted on the training rows,
beside the same fold's prior alone, ``scaled-nearest`` (the prior x the analogs' weighted
ratio) and ``nearest-measured`` (the same workload on the training GPU nearest in bandwidth).
Other sources never enter the fold. Prints MdAPE per target and scenario.

    python bench/sibling_gpu.py [--source aiconfigurator] [--held-out "NVIDIA B200"]
                                [--targets itl ttft]
"""

from __future__ import annotations

import argparse
import datetime as dt
import shlex
import sys
from collections.abc import Sequence

import numpy as np
import pandas as pd
from benchinfo import add_data_arguments, load_measured, machine

from wattgpu.modeling.learning.baselines import NEAREST_METHOD, nearest_measured
from wattgpu.modeling.learning.evaluation import PRIOR_METHOD, SCALED_METHOD, predict_folds
from wattgpu.modeling.learning.recipe import recipe_of
from wattgpu.modeling.learning.splits import source_family
from wattgpu.modeling.metrics import mdape
from wattgpu.modeling.physical.prior import refit_prior_for
from wattgpu.modeling.physical.targets import MEASURED_COLUMN, rows_with_target

HEADER = (
    "| target | scenario | rows | with analogs | catboost | scaled-nearest "
    "| nearest-measured (rows) | physics-prior |"
)


def held_out_answers(rows: pd.DataFrame, target: str, held_out: str) -> pd.DataFrame:
    """The held-out GPU's rows answered by every method, from the other GPUs' rows alone."""
    test = np.flatnonzero(rows["gpu"].to_numpy() == held_out)
    train = np.flatnonzero(rows["gpu"].to_numpy() != held_out)
    recipe = recipe_of(target)
    oof = predict_folds(recipe, rows, [(train, test)], [None], prepare=refit_prior_for(target))
    oof = oof.iloc[test].reset_index(drop=True)
    nearest = nearest_measured(
        rows.iloc[train], rows.iloc[test], MEASURED_COLUMN[target], "gpu", exponent=0.0
    )
    return oof.assign(**{NEAREST_METHOD: nearest})


def table_lines(target: str, answers: pd.DataFrame) -> list[str]:
    """One Markdown row per scenario of the held-out GPU's answers."""
    lines = []
    for scenario, part in answers.groupby("scenario"):
        answered = part[NEAREST_METHOD].notna().to_numpy()
        cells = [
            target,
            scenario,
            str(len(part)),
            f"{(part['analog_count'] > 0).mean():.0%}",
            *(_error(part, column) for column in ("pred", "scaled")),
            f"{_error(part[answered], NEAREST_METHOD)} ({int(answered.sum())})",
            _error(part, "prior"),
        ]
        lines.append("| " + " | ".join(cells) + " |")
    return lines


def _error(part: pd.DataFrame, column: str) -> str:
    return f"{mdape(part['true'], part[column]):.1f}"


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--source", default="aiconfigurator", help="the data family (LOSO's)")
    parser.add_argument("--held-out", default="NVIDIA B200", help="the GPU held out")
    parser.add_argument("--targets", nargs="+", default=["itl", "ttft"])
    add_data_arguments(parser)
    args = parser.parse_args(argv)
    _, measured, _, _ = load_measured(args)
    family = measured[source_family(measured) == args.source].reset_index(drop=True)
    print(f"# {args.held_out} held out of {args.source}'s rows")
    print(f"- date: {dt.datetime.now(dt.UTC).isoformat(timespec='seconds')}")
    print(f"- machine: {machine()}")
    print(f"- command: python bench/sibling_gpu.py {shlex.join(sys.argv[1:])}".rstrip())
    print(f"- training GPUs: {', '.join(sorted(set(family['gpu']) - {args.held_out}))}")
    print()
    print(HEADER)
    print("|---|---|---|---|---|---|---|---|")
    for target in args.targets:
        rows = rows_with_target(target, family)
        if (rows["gpu"] == args.held_out).any():
            for line in table_lines(target, held_out_answers(rows, target, args.held_out)):
                print(line)
    print()
    print(
        f"catboost: CatBoost defaults; {SCALED_METHOD}, {PRIOR_METHOD} and the model from the "
        "same fold (prior refitted on the training GPUs' rows); nearest-measured: the same "
        "workload on the training GPU nearest in bandwidth, on the rows it answers."
    )


if __name__ == "__main__":
    main()
