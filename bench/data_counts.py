"""Row counts of the shipped measurement tables per GPU x engine x scenario (for data/README.md).

Then, per source and ITL statistic, how much the conversion to the served statistic (the median
gap, ``wattgpu.modeling.physical.itl.median_itl``) takes off the measured ITL
(docs/model.md), and on the rows that measured both, the median gap over the mean gap.

python bench/data_counts.py [--data DIR] [--measurements PATH ...]
"""

from __future__ import annotations

import argparse
import datetime as dt
import sys

from benchinfo import add_data_arguments, load_measured, machine

from wattgpu.data.measurements import expand_paths, read_measurements


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_data_arguments(parser)
    args = parser.parse_args()
    print(f"- date: {dt.datetime.now().astimezone().isoformat(timespec='seconds')}")
    print(f"- machine: {machine()}")
    print(f"- command: python bench/data_counts.py {' '.join(sys.argv[1:])}".rstrip())
    for path in expand_paths(args.measurements or [args.data / "measurements"]):
        rows = read_measurements([path])
        print(f"\n### {path.name}: {len(rows)} rows\n")
        print("| GPU | engine | scenario | rows | with power | with ITL | multi-GPU |")
        print("|---|---|---|---|---|---|---|")
        groups = rows.groupby(["gpu", "engine", "scenario"], dropna=False)
        for (gpu, engine, scenario), part in groups:
            print(
                f"| {gpu} | {engine} | {scenario} | {len(part)} | "
                f"{int(part['mean_power_w'].notna().sum())} | {int(part['itl_s'].notna().sum())} | "
                f"{int((part['num_gpus'] > 1).sum())} |"
            )
        kinds = rows["itl_kind"].fillna("(no ITL)").value_counts()
        print("\nITL statistics: " + "; ".join(f"{k}: {n}" for k, n in kinds.items()))
    print_itl_conversion(args)


def print_itl_conversion(args: argparse.Namespace) -> None:
    """What the conversion to the median gap takes off each source's ITLs, as quartiles in %."""
    rows = load_measured(args)[1]
    rows = rows[rows["itl_s"].notna()]
    cut = 100.0 * (1.0 - rows["itl_median_s"] / rows["itl_s"])
    print("\n### ITL converted to the median gap\n")
    print("| source | statistic | rows | taken off, median % | 25-75 % |")
    print("|---|---|---|---|---|")
    for (source, statistic), part in cut.groupby([rows["source"], rows["itl_statistic"]]):
        q1, q2, q3 = part.quantile([0.25, 0.5, 0.75])
        print(f"| {source} | {statistic} | {len(part)} | {q2:.1f} | {q1:.1f}-{q3:.1f} |")
    if "itl_mean_s" not in rows:  # no table measured both gaps
        return
    both = rows["itl_mean_s"].notna()
    ratio = rows.loc[both, "itl_s"] / rows.loc[both, "itl_mean_s"]
    print(
        f"\nRows that measured the median and the mean gap: {int(both.sum())}; "
        f"median gap / mean gap: median {ratio.median():.2f}"
    )


if __name__ == "__main__":
    main()
