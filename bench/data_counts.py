"""Row counts of the shipped measurement tables per GPU x engine x scenario (for data/README.md).

python bench/data_counts.py [--data DIR] [--measurements PATH ...]
"""

from __future__ import annotations

import argparse
import datetime as dt
import sys

from benchinfo import add_data_arguments, machine

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


if __name__ == "__main__":
    main()
