"""The named length distributions (``data/length_distributions.csv``), built from raw files.

A client of ``data/clients.csv`` may draw its requests' lengths from a named distribution: the
21 quantiles (0, 0.05, ..., 1) of a length over its mean, which the simulation scales by a row's
mean length. Two are built here, from the raw files of the sources whose harnesses use them:

* ``llm_pilot``, input and output: every answered request (``status`` 200) of every LLM-Pilot
  results file (shared reference README, "Source 3"), its ``n_input_tokens`` over the mean of
  them all, and its ``n_output_tokens`` likewise.
* ``lmarena``, output: ML.ENERGY v3's published ``output_length_distribution`` histograms of
  the lm-arena-chat task (serving_dynamics.md, B2), one per configuration: each bin's midpoint
  over the configuration's own mean (the histogram's, at the midpoints), pooled over the
  configurations with each bin weighted by its count. Its input side is all ones: the prompts'
  lengths are not published, so a row's mean stands for every prompt.

The quantiles are numpy's default (linear between order statistics), rounded to 3 decimals; each
row's ``source`` names the files, the repository and commit where the path shows them
(``<owner>+<repo>@<commit>``, as the shared reference copy lays them out), and the counts.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from wattgpu.data.clients import LENGTH_COLUMNS, QUANTILES
from wattgpu.data.importers.common import UNREADABLE
from wattgpu.data.importers.llm_pilot import LLM_PILOT_FILE
from wattgpu.data.importers.mlenergy import MLENERGY_V3_FOLDER
from wattgpu.errors import DataError

LMARENA_TASK = "lm-arena-chat"
DECIMALS = 3
# A folder of the shared reference copy named for its repository and commit.
_REPOSITORY = re.compile(r"([^/+]+)\+([^/@]+)@([0-9a-f]{7,40})")


@dataclass(frozen=True)
class Lengths:
    """Lengths of one source, each over its own mean, with how many requests each stands for.

    Attributes:
        ratios: side (``input`` / ``output``) to lengths over their mean.
        counts: requests per ratio (one each for request rows, a bin's count for histograms).
        source: where they come from, for the table's ``source`` column.

    """

    ratios: dict[str, np.ndarray]
    counts: dict[str, np.ndarray]
    source: str


def quantile_ratios(ratios: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """The quantiles ``QUANTILES`` of ``ratios``, each counted ``counts`` times, rounded."""
    pooled = np.repeat(np.asarray(ratios, dtype=float), np.asarray(counts, dtype=np.int64))
    return np.round(np.quantile(pooled, QUANTILES), DECIMALS)


def _repositories(paths: list[str]) -> str:
    """``owner/repo@commit`` of each repository folder the paths pass through, sorted."""
    found = set()
    for path in paths:
        match = _REPOSITORY.search(path)
        if match:
            found.add(f"{match[1]}/{match[2]}@{match[3]}")
    return ", ".join(sorted(found))


def _files(raw_dir: Path, wanted: re.Pattern[str] | None = None) -> list[Path]:
    return sorted(
        p
        for p in Path(raw_dir).rglob("*")
        if p.is_file() and (wanted is None or wanted.fullmatch(p.name))
    )


def read_llm_pilot_lengths(raw_dir: Path) -> Lengths:
    """Every answered request's input and output tokens in the LLM-Pilot files under ``raw_dir``.

    Raises:
        DataError: no results file lies under ``raw_dir``, or one is unreadable (named).

    """
    files = _files(raw_dir, LLM_PILOT_FILE)
    if not files:
        raise DataError(
            f"no LLM-Pilot results file under {raw_dir} (expected "
            "results_<model>_gpu<N>_<type>_u<users>.csv or .csv.xz)"
        )
    sides: dict[str, list[np.ndarray]] = {"input": [], "output": []}
    for path in files:
        try:
            frame = pd.read_csv(path, usecols=["status", "n_input_tokens", "n_output_tokens"])
        except UNREADABLE as exc:
            raise DataError(f"LLM-Pilot file {path} is not in a known format: {exc}") from None
        answered = frame[frame["status"] == 200]
        sides["input"].append(answered["n_input_tokens"].to_numpy(float))
        sides["output"].append(answered["n_output_tokens"].to_numpy(float))
    tokens = {side: np.concatenate(parts) for side, parts in sides.items()}
    repos = _repositories([p.relative_to(raw_dir).as_posix() for p in files])
    source = (
        f"IBM LLM-Pilot raw request files ({repos + ', ' if repos else ''}{len(files)} cases, "
        f"{len(tokens['input']):,} answered requests): quantiles of n_input_tokens / "
        f"n_output_tokens over their means ({tokens['input'].mean():.1f} / "
        f"{tokens['output'].mean():.1f})"
    )
    return Lengths(
        ratios={side: values / values.mean() for side, values in tokens.items()},
        counts={side: np.ones(len(values), dtype=np.int64) for side, values in tokens.items()},
        source=source,
    )


def read_lmarena_lengths(raw_dir: Path) -> Lengths:
    """ML.ENERGY v3's lm-arena-chat output histograms under ``raw_dir``, each over its mean.

    Raises:
        DataError: no lm-arena-chat model file lies under ``raw_dir``, or one is unreadable.

    """
    files = [
        p
        for p in _files(raw_dir)
        if p.suffix == ".json"
        and p.parts[-4:-1] == MLENERGY_V3_FOLDER
        and p.stem.endswith(f"__{LMARENA_TASK}")
    ]
    ratios, counts = [], []
    for path in files:
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
            for config in data["configurations"] if data.get("task") == LMARENA_TASK else []:
                histogram = config["output_length_distribution"]
                edges = np.asarray(histogram["bins"], dtype=float)
                count = np.asarray(histogram["counts"], dtype=np.int64)
                middle = (edges[:-1] + edges[1:]) / 2
                ratios.append(middle / ((middle * count).sum() / count.sum()))
                counts.append(count)
        except (*UNREADABLE, json.JSONDecodeError) as exc:
            raise DataError(f"ML.ENERGY file {path} is not in a known format: {exc}") from None
    if not ratios:
        raise DataError(
            f"no ML.ENERGY v3 {LMARENA_TASK} file under {raw_dir} (expected "
            f"public/data/models/<org>__<model>__{LMARENA_TASK}.json)"
        )
    repos = _repositories([p.relative_to(raw_dir).as_posix() for p in files])
    source = (
        f"ML.ENERGY v3 {LMARENA_TASK} output_length_distribution histograms "
        f"({repos + ', ' if repos else ''}{len(ratios)} configurations of {len(files)} models, "
        "each over its own mean, bin midpoints, pooled by counts); prompts: not published, "
        "held at the row's mean"
    )
    output = np.concatenate(ratios)
    return Lengths(
        ratios={"input": np.ones(1), "output": output},
        counts={"input": np.ones(1, dtype=np.int64), "output": np.concatenate(counts)},
        source=source,
    )


def length_distributions(raw_dir: Path) -> pd.DataFrame:
    """The table of ``data/length_distributions.csv`` from the raw files under ``raw_dir``.

    One row per (distribution, side, quantile): ``llm_pilot`` from LLM-Pilot's request files,
    ``lmarena`` from ML.ENERGY v3's lm-arena-chat histograms (both must lie under ``raw_dir``).

    Raises:
        DataError: either source's files are missing or unreadable.

    """
    sources = {
        "llm_pilot": read_llm_pilot_lengths(raw_dir),
        "lmarena": read_lmarena_lengths(raw_dir),
    }
    rows = [
        {
            "distribution": name,
            "side": side,
            "quantile": float(level),
            "ratio_to_mean": float(ratio),
            "source": lengths.source,
        }
        for name, lengths in sources.items()
        for side in ("input", "output")
        for level, ratio in zip(
            QUANTILES, quantile_ratios(lengths.ratios[side], lengths.counts[side]), strict=True
        )
    ]
    return pd.DataFrame(rows, columns=list(LENGTH_COLUMNS))
