"""What every benchmark prints about where it ran, and where it finds the measurements.

The scripts run as ``python bench/NAME.py``, so this folder is on their import path.
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
from pathlib import Path

import pandas as pd

from wattgpu.config import SHIPPED_DATA_DIR
from wattgpu.data.catalog import Catalog
from wattgpu.data.measurements import expand_paths, read_measurements, resolve_names
from wattgpu.errors import WattgpuError
from wattgpu.modeling.physical.features import build_features

REPO = Path(__file__).resolve().parents[1]


def cpu_name() -> str:
    """The CPU model as /proc/cpuinfo names it."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown CPU"


def machine() -> str:
    """One line: platform, CPU model and CPU count."""
    return f"{platform.platform()}; {cpu_name()}; {os.cpu_count()} CPUs"


def add_data_arguments(parser: argparse.ArgumentParser) -> None:
    """``--data`` (the catalogues) and ``--measurements`` (default: the shipped real ones)."""
    parser.add_argument(
        "--data",
        type=Path,
        default=SHIPPED_DATA_DIR,
        help="folder of gpus.csv, llms.csv and measurements/ (default: the shipped data)",
    )
    parser.add_argument(
        "--measurements",
        type=Path,
        nargs="+",
        help="measurement CSV files or folders (default: <data>/measurements)",
    )


def load_measured(
    args: argparse.Namespace,
) -> tuple[Catalog, pd.DataFrame, pd.DataFrame, list[Path]]:
    """The catalogue, the measured rows that resolve (with features), the raw rows, the files."""
    catalog = Catalog.load(args.data / "gpus.csv", args.data / "llms.csv")
    try:
        files = expand_paths(args.measurements or [args.data / "measurements"])
        raw = read_measurements(files)
    except WattgpuError as exc:
        sys.exit(str(exc))
    rows, unresolved = resolve_names(raw, catalog)
    if len(unresolved):
        first = unresolved.iloc[0]
        print(
            f"warning: {len(unresolved)} rows name a GPU or LLM missing from the catalogue "
            f"(e.g. {first['gpu']!r}, {first['model']!r}); they are left out",
            file=sys.stderr,
        )
    return catalog, build_features(rows, catalog), raw, files
