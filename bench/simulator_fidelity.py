"""How close the simulated serving loop (modeling.serving) comes to each source, and how fast.

Every shipped measured row is simulated under its own harness (its client, data/clients.csv,
and its engine's release line, data/engine_lines.csv) with today's prior step constants, not
refitted (the kernels' shares of ``physics.DEFAULT_CONSTANTS``; host times as the engine lines
state them). Per source (client) and engine it prints the MdAPE and the bias (median of
simulated / measured) of:

* TTFT, in the statistic the source measured (a request mean or a median);
* ITL, in the statistic the source measured: the median gap, a request's mean TPOT, or a
  latency per output token that counts the prefill (``features.itl_statistic``);
* the busy share beside the measured power over TDP where power was measured (their medians:
  the simulation gives no watts; Spearman's rho over all such rows at the end).

Beside them, on the same rows, today's closed-form prior (``prior_columns.with_prior``) against the
same measurements: its TTFT against the measured TTFT and its ITL against the measured ITL
converted to the median gap (``itl.median_itl``), as the main job scores it.

Then the speed: every shipped row simulated at once, and one query alone (median of 5 runs, each
simulated afresh: ``simulate_rows`` keeps the rows it simulated), in wall time and in this
process's CPU time (on a shared machine the wall time counts the other processes' turns too).

    python bench/simulator_fidelity.py [--data DIR] [--measurements PATH ...]
"""

from __future__ import annotations

import argparse
import datetime as dt
import platform
import sys
import time

import numpy as np
import pandas as pd
from benchinfo import add_data_arguments, load_measured, machine
from scipy.stats import spearmanr

from wattgpu.modeling.physical.features import build_features
from wattgpu.modeling.physical.itl import median_itl
from wattgpu.modeling.physical.prior_columns import with_prior
from wattgpu.modeling.serving.prior import simulated_itl
from wattgpu.modeling.serving.run import forget_simulated, simulate_rows
from wattgpu.modeling.serving.ttft_terms import simulated_ttft

QUERY = {
    "gpu": "NVIDIA H100 SXM5",
    "model": "meta-llama/Llama-3.1-8B-Instruct",
    "scenario": "server",
    "concurrency": 64.0,
    "input_tokens": 1000.0,
    "output_tokens": 200.0,
}


def _score(pred: pd.Series, true: pd.Series) -> tuple[int, float, float]:
    """Rows, MdAPE % and bias (median pred / true) where both are positive."""
    p, t = pred.to_numpy(float), true.to_numpy(float)
    ok = np.isfinite(p) & np.isfinite(t) & (p > 0) & (t > 0)
    if not ok.any():
        return 0, np.nan, np.nan
    ratio = p[ok] / t[ok]
    return int(ok.sum()), 100 * float(np.median(np.abs(ratio - 1))), float(np.median(ratio))


def _cells(n: int, *figures: float) -> str:
    """``rows | MdAPE | bias | MdAPE | bias``, blank where no row scores."""
    if not n:
        return " | | | | "
    mdape, bias, prior_mdape, prior_bias = figures
    return f"{n} | {mdape:.1f} | {bias:.2f} | {prior_mdape:.1f} | {prior_bias:.2f}"


def fidelity_table(rows: pd.DataFrame, sim: pd.DataFrame, prior: pd.DataFrame) -> list[str]:
    """One markdown line per (client, engine), then every row together."""
    sim_itl = pd.Series(simulated_itl(rows, sim), index=rows.index)
    sim_ttft = pd.Series(simulated_ttft(rows, sim), index=rows.index)
    measured_itl_median = pd.Series(median_itl(rows), index=rows.index)
    load = rows["mean_power_w"] / rows["gpu_tdp_w"]
    lines = [
        "| client | engine | TTFT rows | sim MdAPE % | sim bias | prior MdAPE % | prior bias "
        "| ITL rows | sim MdAPE % | sim bias | prior MdAPE % | prior bias | power rows "
        "| sim busy share | power / TDP |",
        "|" + "---|" * 15,
    ]
    groups = [(key, part.index) for key, part in rows.groupby(["client", "engine"], sort=True)]
    groups.append((("all", "any"), rows.index))
    for (client, engine), index in groups:
        n_t, sim_t, sim_tb = _score(sim_ttft[index], rows.loc[index, "ttft_s"])
        _, pri_t, pri_tb = _score(prior.loc[index, "prior_ttft_s"], rows.loc[index, "ttft_s"])
        n_i, sim_i, sim_ib = _score(sim_itl[index], rows.loc[index, "itl_s"])
        _, pri_i, pri_ib = _score(prior.loc[index, "prior_itl_s"], measured_itl_median[index])
        powered = load[index].dropna().index
        busy = f"{sim.loc[powered, 'busy_share'].median():.2f}" if len(powered) else ""
        share = f"{load[powered].median():.2f}" if len(powered) else ""
        ttft = _cells(n_t, sim_t, sim_tb, pri_t, pri_tb)
        itl = _cells(n_i, sim_i, sim_ib, pri_i, pri_ib)
        lines.append(
            f"| {client} | {engine} | {ttft} | {itl} | {len(powered)} | {busy} | {share} |"
        )
    powered = load.dropna().index
    rho = spearmanr(sim.loc[powered, "busy_share"], load[powered]).statistic
    lines.append("")
    lines.append(
        f"Spearman's rho of the simulated busy share and the measured power / TDP over the "
        f"{len(powered)} rows with power: {rho:.2f}"
    )
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_data_arguments(parser)
    args = parser.parse_args()
    print("# Serving simulator fidelity and speed (wattgpu.modeling.serving)\n")
    print(f"- date: {dt.datetime.now().astimezone().isoformat(timespec='seconds')}")
    print(f"- machine: {machine()}")
    print(f"- python {platform.python_version()}, numpy {np.__version__}")
    print(f"- command: python bench/simulator_fidelity.py {' '.join(sys.argv[1:])}".rstrip())
    catalog, rows, _, _ = load_measured(args)
    rows = rows[rows["client"].notna()].reset_index(drop=True)
    start, cpu = time.perf_counter(), time.process_time()
    sim = simulate_rows(rows)
    seconds, cpu_seconds = time.perf_counter() - start, time.process_time() - cpu
    prior = with_prior(rows)
    one = build_features(pd.DataFrame([QUERY]), catalog)
    times, cpu_times = [], []
    for _ in range(5):
        # a query simulated afresh, not the answer kept from the run before
        forget_simulated()
        start, cpu = time.perf_counter(), time.process_time()
        simulate_rows(one)
        times.append(time.perf_counter() - start)
        cpu_times.append(time.process_time() - cpu)
    overloaded = int((sim["overloaded"] > 0).sum())
    print(f"- rows: {len(rows)} ({overloaded} ran past their engine's capacity)")
    print(
        f"- speed: every row simulated at once in {seconds:.1f} s ({cpu_seconds:.1f} s of CPU); "
        "one query alone (H100,"
    )
    print(
        f"  Llama-3.1-8B, 64 users, 1,000 in / 200 out) in {1000 * np.median(times):.0f} ms "
        f"({1000 * np.median(cpu_times):.0f} ms of CPU)"
    )
    print("  (median of 5 runs)")
    print()
    print("\n".join(fidelity_table(rows, sim, prior)))


if __name__ == "__main__":
    main()
