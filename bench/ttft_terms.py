"""The simulation's TTFT terms (a per-request overhead, a prefill efficiency), fitted per group.

Every shipped TTFT row (AIConfigurator's, LLM-Pilot's) simulated at each prefill efficiency of
``ttft_terms.EFFICIENCIES`` under its own client; AIConfigurator's also under aiperf's free closed
loop (``clients.csv`` ``aiperf``: each slot resends when its own answer ends) beside its shipped
*rounds*. Printed, with date, machine and command:

1. per GPU x engine line, the fitted efficiency g and overhead o and their in-sample MdAPE, for
   each client: the client whose g is physically plausible (near 1: the prior's kernels are near
   the GPU's peak) is the one that reproduces how the rows' TTFT grows;
2. per source x engine, TTFT MdAPE %: the simulation alone (g = 1, o = 0), its terms fitted per
   GPU x engine line in sample, and per engine line leaving each GPU out (the terms of the other
   GPUs' rows), for each client.

    python bench/ttft_terms.py [--data DIR] [--measurements PATH ...]
"""

from __future__ import annotations

import argparse
import datetime as dt
import sys
import time

import numpy as np
import pandas as pd
from benchinfo import add_data_arguments, load_measured, machine

from wattgpu.modeling.serving.ttft_terms import (
    EFFICIENCIES,
    fit_terms,
    simulate_efficiencies,
    with_terms,
)
from wattgpu.modeling.serving.workload import engine_line_names

# (source's client, the clients it is simulated under)
SOURCES = (("aiconfigurator", ("aiconfigurator", "aiperf")), ("llm-pilot", ("llm-pilot",)))
PLAIN = int(np.argmin(np.abs(EFFICIENCIES - 1.0)))


def mdape(pred: np.ndarray, true: np.ndarray) -> float:
    ok = np.isfinite(pred) & np.isfinite(true) & (true > 0)
    return 100.0 * float(np.median(np.abs(pred[ok] / true[ok] - 1.0))) if ok.any() else np.nan


def held_out_gpu(gpus: np.ndarray, lines: np.ndarray, true: np.ndarray, sim: np.ndarray):
    """Each row's TTFT under its engine line's terms fitted on the other GPUs' rows."""
    out = np.full(len(gpus), np.nan)
    for gpu in np.unique(gpus):
        mine = gpus == gpu
        fitted = fit_terms(lines[~mine], true[~mine], sim[~mine])
        out[mine] = with_terms(lines[mine], fitted, sim[mine])
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_data_arguments(parser)
    args = parser.parse_args()
    print("# TTFT terms of the simulated serving loop (wattgpu.modeling.serving.ttft_terms)\n")
    print(f"- date: {dt.datetime.now().astimezone().isoformat(timespec='seconds')}")
    print(f"- machine: {machine()}")
    print(f"- command: python bench/ttft_terms.py {' '.join(sys.argv[1:])}".rstrip())
    print(f"- efficiencies tried: {', '.join(f'{g:.3g}' for g in EFFICIENCIES)}")
    _, rows, _, _ = load_measured(args)
    rows = rows[rows["ttft_s"].notna() & (rows["ttft_s"] > 0)].reset_index(drop=True)
    start = time.perf_counter()
    per_group, summary = [], []
    for source, simulated_as in SOURCES:
        part = rows[rows["client"] == source].reset_index(drop=True)
        true = part["ttft_s"].to_numpy(float)
        gpus = part["gpu"].to_numpy(object)
        for client in simulated_as:
            as_client = part.assign(client=client)
            lines = np.asarray(engine_line_names(as_client), dtype=object)
            sim = simulate_efficiencies(as_client)
            groups = np.array([f"{g} x {line}" for g, line in zip(gpus, lines, strict=True)])
            fitted = fit_terms(groups, true, sim)
            for group, terms in sorted(fitted.items()):
                if group:
                    per_group.append(
                        f"| {source} | {client} | {group} | {terms.rows} | "
                        f"{terms.efficiency:.3g} | {1000 * terms.overhead_s:.0f} | "
                        f"{terms.mdape:.1f} |"
                    )
            in_sample = with_terms(groups, fitted, sim)
            logo = held_out_gpu(gpus, lines, true, sim)
            for line in [*np.unique(lines), None]:
                mine = np.ones(len(lines), bool) if line is None else lines == line
                summary.append(
                    f"| {source} | {client} | {line or 'all'} | {int(mine.sum())} | "
                    f"{mdape(sim[mine, PLAIN], true[mine]):.1f} | "
                    f"{mdape(in_sample[mine], true[mine]):.1f} | "
                    f"{mdape(logo[mine], true[mine]):.1f} |"
                )
    print(f"- time: {time.perf_counter() - start:.0f} s\n")
    print("## Per GPU x engine line, in sample\n")
    print(
        "| source | simulated as | GPU x engine line | rows | efficiency g | overhead o ms "
        "| MdAPE % |"
    )
    print("|---|---|---|---|---|---|---|")
    print("\n".join(per_group))
    print("\n## TTFT MdAPE %, the simulation alone and with its terms\n")
    print(
        "| source | simulated as | engine line | rows | alone (g 1, o 0) | "
        "terms per GPU x line, in sample | terms per line, GPU held out |"
    )
    print("|---|---|---|---|---|---|---|")
    print("\n".join(summary))


if __name__ == "__main__":
    pd.set_option("display.width", 200)
    main()
