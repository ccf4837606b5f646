"""How many runs of a public benchmark the catalogue refuses for their GPU's name.

The benchmark is tech-grandpa/llmperf (Dec 2024 - Mar 2025): SQLite files (``results.db``,
``results/*.db``, table ``benchmark_runs``) whose ``gpu_info`` names each run's GPU as its author
wrote it ("RTX A6000 Ada", "(runpod) H100 SXM", "RTX 3090 (P)"). The "(runpod)" prefix (where it
ran) and the "(P)" suffix (a parallel run) are the benchmark's labels, not part of the name, and
are dropped; a run on two GPUs ("RTX A5000 + RTX 3090") stays as written and is refused. A run is
one timestamp: the combined files repeat the runs of the others. AMD runs (MI300X) are left out.
Each name goes through the resolver a query goes through (``Catalog.match``). Nothing of the
benchmark is imported into the product; this only counts.

    python bench/llmperf_names.py PATH [--data DIR]

PATH: a checkout of the repository, a folder of its .db files, or its bare git directory (as a
mirror holds it; the files are then read with ``git show``). ``--data``: the folder of the
catalogues (default: the shipped data).
"""

from __future__ import annotations

import argparse
import datetime as dt
import re
import sqlite3
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pandas as pd
from benchinfo import machine

from wattgpu.config import SHIPPED_DATA_DIR
from wattgpu.data.catalog import Catalog

# "(runpod) RTX A6000 ADA (P)" -> "RTX A6000 ADA"
LABELS = re.compile(r"^\s*\(runpod\)\s*|\s*\(P\)\s*$", re.IGNORECASE)
AMD = re.compile(r"\bMI\d{3}", re.IGNORECASE)
QUERY = "SELECT timestamp, model, gpu_info FROM benchmark_runs"


def gpu_name(label: str) -> str:
    """The GPU's name in a run's ``gpu_info``, the benchmark's own labels dropped."""
    return LABELS.sub("", str(label)).strip()


def databases(path: Path) -> Iterator[tuple[str, bytes]]:
    """Each ``.db`` file under ``path`` (a folder, or a git directory), by its path as text."""
    if (path / "HEAD").is_file() and (path / "objects").is_dir():
        listed = subprocess.run(
            ["git", f"--git-dir={path}", "ls-tree", "-r", "--name-only", "HEAD"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.split()
        for name in sorted(n for n in listed if n.endswith(".db")):
            blob = subprocess.run(
                ["git", f"--git-dir={path}", "show", f"HEAD:{name}"],
                capture_output=True,
                check=True,
            ).stdout
            yield name, blob
    else:
        for name in sorted(str(file.relative_to(path)) for file in path.rglob("*.db")):
            yield name, (path / name).read_bytes()


def read_runs(path: Path) -> pd.DataFrame:
    """One row per run (first file that holds its timestamp): file, timestamp, model, gpu_info."""
    frames = []
    for name, blob in databases(path):
        if not blob:
            continue  # an empty file: no table
        connection = sqlite3.connect(":memory:")
        try:
            connection.deserialize(blob)
            frame = pd.read_sql_query(QUERY, connection)
        except (sqlite3.DatabaseError, pd.errors.DatabaseError):
            continue  # a .db file without the benchmark's table
        finally:
            connection.close()
        frames.append(frame.assign(file=name))
    if not frames:
        raise SystemExit(f"no benchmark_runs table in any .db file under {path}")
    runs = pd.concat(frames, ignore_index=True).drop_duplicates("timestamp")
    return runs[~runs["gpu_info"].astype(str).str.contains(AMD)].reset_index(drop=True)


def resolved(runs: pd.DataFrame, catalog: Catalog) -> pd.DataFrame:
    """Per run: the GPU's name, the GPU it resolves to (blank: refused) and why not."""
    names = runs["gpu_info"].map(gpu_name)
    matches = {name: catalog.match("gpu", name) for name in names.unique()}
    return pd.DataFrame(
        {
            "gpu": names,
            "resolves_to": names.map(lambda n: matches[n].canonical),
            "problem": names.map(lambda n: matches[n].problem),
        }
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("path", type=Path, help="the benchmark's checkout or git directory")
    parser.add_argument("--data", type=Path, default=SHIPPED_DATA_DIR, help="the catalogues")
    args = parser.parse_args()
    catalog = Catalog.load(args.data / "gpus.csv", args.data / "llms.csv")
    table = resolved(read_runs(args.path), catalog)
    refused = table[table["resolves_to"].isna()]
    print("# Runs of tech-grandpa/llmperf refused for their GPU's name")
    print(f"- date: {dt.datetime.now().astimezone().isoformat(timespec='seconds')}")
    print(f"- machine: {machine()}")
    print(f"- command: python bench/llmperf_names.py {' '.join(sys.argv[1:])}")
    print(f"- catalogue: {len(catalog.gpus)} GPUs ({args.data / 'gpus.csv'})")
    print(f"- runs on NVIDIA GPUs: {len(table)}; distinct GPU names: {table['gpu'].nunique()}")
    print(f"- refused for the GPU's name: {len(refused)}")
    print()
    print("| GPU as written | runs | resolves to |")
    print("|---|---|---|")
    for gpu, part in table.groupby("gpu", sort=True):
        first = part.iloc[0]
        answer = (
            f"refused: {first['problem']}"
            if pd.isna(first["resolves_to"])
            else first["resolves_to"]
        )
        print(f"| {gpu} | {len(part)} | {answer} |")


if __name__ == "__main__":
    main()
