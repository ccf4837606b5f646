"""What every benchmark prints about where it ran, and where it finds the reference data.

The scripts run as ``python bench/NAME.py``, so this folder is on their import path.
"""

from __future__ import annotations

import argparse
import os
import platform
from pathlib import Path

from wattgpu.config import SHIPPED_DATA_DIR

REPO = Path(__file__).resolve().parents[1]
DEFAULT_REFERENCE = REPO.parent / "shared" / "reference"


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


def add_reference_arguments(parser: argparse.ArgumentParser) -> None:
    """``--reference`` (the real measurements) and ``--data`` (the catalogues)."""
    parser.add_argument(
        "--reference",
        type=Path,
        default=Path(os.environ.get("WATTGPU_REFERENCE_DIR", DEFAULT_REFERENCE)),
        help="folder holding <source>/measurements.csv (default: ../shared/reference, "
        "or $WATTGPU_REFERENCE_DIR)",
    )
    parser.add_argument(
        "--data", type=Path, default=SHIPPED_DATA_DIR, help="folder of gpus.csv, llms.csv"
    )
