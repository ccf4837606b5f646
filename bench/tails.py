"""Tail latencies on LLM-Pilot's rows, one GPU left out at a time: the simulation against the rule.

LLM-Pilot (TGI, A10 / A100 / H100 / T4, 1 to 128 users) measured every request, so its rows carry
the p90 and p99 of TTFT and of ITL (``data/measurements/llm_pilot.csv``). For each GPU held out,
a tail answer is a median times a ratio of that percentile to the median:

* ``rule``, the practitioner's: the training rows' (the other GPUs') pooled ratio, the median of
  their measured percentile / median;
* ``simulated``: the simulated serving loop's own ratio for the row's client and engine
  (``modeling.serving``), every step taking its time exactly;
* ``jittered``: the same loop, its steps spread by the jitter of the training rows' one-user
  gaps (``serving.jitter``, fitted on the other GPUs' rows: what ``predict`` answers);
* ``corrected``: the simulated ratio times the training rows' median of measured ratio over
  simulated ratio (the simulation corrected where measured tails exist);
* ``per users``: the training rows' measured ratio at the row's number of users (and kind of
  client), linear in log(users) between two (``answering.tail_ratios``);
* ``learnt``: ``per users`` with the simulated ratio as a feature, log(ratio) = per users + b x
  (the row's jittered log ratio - the training rows' median at its users), b fitted by least
  squares on the training rows;
* ``ships``: what ``predict`` answers for such a row: ITL ``jittered``, TTFT ``per users``
  (``answering.tails``);
* with ``--length-spread S ...``, ``spread S``: ``jittered`` with the rows' traced lengths
  replaced by lognormal ones of sigma S around their means (``--length-spread``, what a query's
  default clients assume: does a stated spread stand in for a real trace?).

The median is the measured one, so that the figures compare the ratios alone (the model's median
error comes on top of every method alike). Printed: MdAPE % of each method per tail, and how much
lower the others are than the rule's (issue 68's aim: at least 20 % lower on every tail).

    python bench/tails.py [--data DIR] [--measurements PATH ...] [--length-spread S ...]
"""

from __future__ import annotations

import argparse
import datetime as dt
import sys

import numpy as np
import pandas as pd
from benchinfo import add_data_arguments, load_measured, machine

from wattgpu.modeling.answering.tail_ratios import RATIO_TARGETS, client_kinds, fit_tail_ratios
from wattgpu.modeling.serving.jitter import fit_jitter
from wattgpu.modeling.serving.run import simulate_rows
from wattgpu.modeling.serving.workload import LENGTH_SPREAD

# (target, percentile): the measured column, its median column, the simulated columns.
TAILS = (("ttft", "p90"), ("ttft", "p99"), ("itl", "p90"), ("itl", "p99"))


def jittered_simulation(rows: pd.DataFrame, spread: float | None = None) -> pd.DataFrame:
    """Each row simulated with the jitter fitted on the other GPUs' rows (its GPU held out).

    ``spread``: the rows' lengths lognormal of that sigma around their means instead of their
    client's (``serving.workload.LENGTH_SPREAD``).
    """
    out = []
    gpus = rows["gpu"].to_numpy()
    simulated = rows if spread is None else rows.assign(**{LENGTH_SPREAD: spread})
    for gpu in np.unique(gpus):
        held = gpus == gpu
        out.append(simulate_rows(simulated[held], jitter=fit_jitter(rows[~held])))
    return pd.concat(out).loc[rows.index]


def ratio(sim: pd.DataFrame, target: str, level: str) -> np.ndarray:
    """The simulated percentile over the simulated median."""
    return (sim[f"{target}_{level}_s"] / sim[f"{target}_p50_s"]).to_numpy(float)


def tail_answers(
    rows: pd.DataFrame,
    sim: pd.DataFrame,
    jittered: pd.DataFrame,
    spreads: dict[str, pd.DataFrame] | None = None,
) -> pd.DataFrame:
    """Each row's tail answers by every method, its GPU held out of the ratios' training rows.

    ``spreads``: more jittered simulations by method name (``spread S``).
    """
    out = []
    gpus = rows["gpu"].to_numpy()
    users = rows["users"].to_numpy(float)
    kinds = client_kinds(rows)
    for target, level in TAILS:
        measured = rows[f"{target}_{level}_s"].to_numpy(float)
        median = rows[f"{target}_s"].to_numpy(float)
        measured_ratio = measured / median
        simulated_ratio = ratio(sim, target, level)
        jittered_ratio = ratio(jittered, target, level)
        for gpu in np.unique(gpus):
            held = gpus == gpu
            rule = np.nanmedian(measured_ratio[~held])
            correction = np.nanmedian(measured_ratio[~held] / simulated_ratio[~held])
            fitted = fit_tail_ratios(rows[~held], target)
            per_users = np.exp(fitted.log_ratios(kinds, users)[level]) if fitted else np.nan
            learnt = per_users * _learnt_factor(
                np.log(measured_ratio / per_users), np.log(jittered_ratio), users, held
            )
            ratios = {
                "rule": np.full(held.sum(), rule),
                "simulated": simulated_ratio[held],
                "jittered": jittered_ratio[held],
                "corrected": simulated_ratio[held] * correction,
                "per users": per_users[held],
                "learnt": learnt[held],
                "ships": (per_users if target in RATIO_TARGETS else jittered_ratio)[held],
            }
            for method, simulation in (spreads or {}).items():
                ratios[method] = ratio(simulation, target, level)[held]
            for method, answer_ratio in ratios.items():
                out.append(
                    pd.DataFrame(
                        {
                            "tail": f"{target} {level}",
                            "gpu": gpu,
                            "method": method,
                            "answer": median[held] * answer_ratio,
                            "measured": measured[held],
                        }
                    )
                )
    return pd.concat(out, ignore_index=True)


def _learnt_factor(
    residual: np.ndarray, simulated: np.ndarray, users: np.ndarray, held: np.ndarray
) -> np.ndarray:
    """exp(b x the simulated log ratio's departure from the training rows' median at its users).

    ``residual``: log(measured / per users); b by least squares over the training rows.
    """
    median = pd.Series(simulated[~held]).groupby(users[~held]).median()
    departure = simulated - median.reindex(users).to_numpy(float)
    ok = ~held & np.isfinite(departure) & np.isfinite(residual)
    slope = np.sum(departure[ok] * residual[ok]) / np.sum(departure[ok] ** 2)
    return np.exp(slope * departure)


def scores(answers: pd.DataFrame) -> pd.DataFrame:
    """MdAPE % per tail and method (all held-out GPUs together), methods in their first order."""
    ape = (answers["answer"] / answers["measured"] - 1).abs() * 100
    frame = answers.assign(ape=ape).dropna(subset=["ape"])
    overall = frame.groupby(["tail", "method"])["ape"].median().unstack("method")
    return overall[list(dict.fromkeys(answers["method"]))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_data_arguments(parser)
    parser.add_argument(
        "--length-spread",
        type=float,
        nargs="+",
        default=[],
        metavar="S",
        help="also score lognormal lengths of these sigmas in place of the rows' own",
    )
    args = parser.parse_args()
    print("# Tail latencies on LLM-Pilot's rows, leaving one GPU out\n")
    print(f"- date: {dt.datetime.now().astimezone().isoformat(timespec='seconds')}")
    print(f"- machine: {machine()}")
    print(f"- command: python bench/tails.py {' '.join(sys.argv[1:])}".rstrip())
    _, rows, _, _ = load_measured(args)
    rows = rows[rows["ttft_p99_s"].notna()].reset_index(drop=True)
    gpus = ", ".join(sorted(rows["gpu"].unique()))
    print(f"- rows: {len(rows)} with measured tails (GPUs: {gpus})\n")
    spreads = {f"spread {s:g}": jittered_simulation(rows, s) for s in args.length_spread}
    table = scores(tail_answers(rows, simulate_rows(rows), jittered_simulation(rows), spreads))
    methods = list(table.columns)
    others = methods[1:]
    print(
        "| tail | "
        + " | ".join(f"{m} MdAPE %" for m in methods)
        + " | "
        + " | ".join(f"{m} vs rule" for m in others)
        + " |"
    )
    print("|---|" + "---|" * (len(methods) + len(others)))
    for tail, line in table.iterrows():
        figures = [f"{line[m]:.1f}" for m in methods]
        gains = [f"{100 * (1 - line[m] / line['rule']):+.0f} %" for m in others]
        print(f"| {tail} | " + " | ".join(figures + gains) + " |")
    print("\n(vs rule: how much lower the MdAPE is than the rule's; issue 68's aim: +20 % or more")
    print("on every tail)")


if __name__ == "__main__":
    main()
