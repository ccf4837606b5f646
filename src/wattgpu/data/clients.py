"""Benchmark clients as data (``data/clients.csv``) and named length distributions.

A client says what drives the engine: a closed loop of N users (``closed``), rounds of N
requests sent together, each when the last has ended (``rounds``), Poisson arrivals at
a rate (``poisson``) or every request at once (``batch``); how long its requests are (``fixed``
at the row's means, ``uniform`` within ``spread`` of them, ``lognormal`` with ``spread`` the
standard deviation of a length's logarithm, or a distribution named in
``data/length_distributions.csv``: quantiles of a length over its mean); how many requests it
sends before measuring and while measuring; the engine release line its server ran where the
row's engine name alone does not say it (``engine_line``, a line of ``data/engine_lines.csv``:
LLM-Pilot's TGI-family server was IBM's TGIS); the engine knobs its harness set
(``max_batched_tokens``, ``memory_fraction``, ``chunked_prefill``; ``batch_is_max_num_seqs``: the
row's ``batch_size`` is the engine's ``--max-num-seqs``; ``host_share``: the share of the engine
line's host time the harness's way of calling the engine pays, below 1 for an offline call with
no API server); and which TTFT statistic it reports.
Every shipped measurement names its harness's client (the importers write ``client``); a query
gets ``closed`` for ``--concurrency``, ``poisson`` for ``--rate``, ``batch`` for ``--batch-size``,
or names one (``--client``).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from pathlib import Path
from statistics import NormalDist

import numpy as np
import pandas as pd

from wattgpu.config import SHIPPED_DATA_DIR
from wattgpu.errors import DataError

CLIENTS_FILE = "clients.csv"
LENGTHS_FILE = "length_distributions.csv"
KINDS = ("closed", "rounds", "poisson", "batch")
# What a query without a client gets, by how it states its load.
CLIENT_FOR_LOAD = {"concurrency": "closed", "rate": "poisson", "batch": "batch"}
FIXED, UNIFORM, LOGNORMAL = "fixed", "uniform", "lognormal"
# The widest lognormal spread (sigma of log length): 3 puts the 99th percentile at 200 x the mean.
MAX_LOGNORMAL_SPREAD = 3.0
# The levels a lognormal's table ends at instead of 0 and 1 (where its quantiles are 0 and
# infinite): one request in 400 beyond each end.
LOGNORMAL_ENDS = (0.0025, 0.9975)
# Lengths whose shape the source does not publish: the row's mean lengths are all that is known.
UNKNOWN = "unknown"
# The quantile levels every length table gives (0, 0.05, ..., 1).
QUANTILES = np.round(np.linspace(0.0, 1.0, 21), 2)
# The columns of the length table, and the lengths a distribution describes.
LENGTH_COLUMNS = ("distribution", "side", "quantile", "ratio_to_mean", "source")
SIDES = ("input", "output")
# The TTFT statistics a client's harness may report (``ttft_statistic``).
TTFT_STATISTICS = ("median", "mean")
NUMERIC = (
    "spread",
    "warmup_per_user",
    "requests_per_user",
    "total_requests",
    "batch_is_max_num_seqs",
    "max_batched_tokens",
    "memory_fraction",
    "chunked_prefill",
    "host_share",
)
# What a source may leave unstated (``inferred`` / ``unknown`` name them): the client's facts, and
# the engine's cap on running requests where the row does not sweep it.
FACTS = ("kind", "lengths", *NUMERIC, "ttft_statistic", "engine_line", "max_num_seqs")
# A value a source does not state is blank in the table (``unknown``), never a stand-in; a value
# read off the data or another document rather than stated by the source is ``inferred``, and
# ``source`` names its evidence.
PROVENANCE = ("inferred", "unknown")
REQUIRED = (
    "client",
    "kind",
    "lengths",
    *NUMERIC,
    "ttft_statistic",
    "engine_line",
    *PROVENANCE,
    "source",
)


@dataclass(frozen=True)
class Clients:
    """The clients (by name) and the length distributions (name -> side -> quantile ratios)."""

    table: pd.DataFrame
    shapes: dict[str, dict[str, np.ndarray]]

    @classmethod
    def read(cls, clients: Path, lengths: Path) -> Clients:
        """Load and check ``clients.csv`` and ``length_distributions.csv``."""
        try:
            frame = pd.read_csv(
                clients, dtype={"client": str, "kind": str, "lengths": str, "engine_line": str}
            )
            dist = pd.read_csv(lengths)
        except (OSError, pd.errors.ParserError) as exc:
            raise DataError(f"client tables are not readable CSV files: {exc}") from None
        missing = [c for c in REQUIRED if c not in frame.columns]
        if missing:
            raise DataError(f"client table {clients} lacks the columns {', '.join(missing)}")
        bad = sorted(set(frame["kind"]) - set(KINDS))
        if bad:
            raise DataError(f"client table {clients}: kind must be one of {KINDS}; got {bad[0]!r}")
        shapes: dict[str, dict[str, np.ndarray]] = {}
        for (name, side), part in dist.groupby(["distribution", "side"]):
            ratios = part.sort_values("quantile")["ratio_to_mean"].to_numpy(float)
            if len(ratios) != len(QUANTILES) or (np.diff(ratios) < 0).any() or (ratios <= 0).any():
                raise DataError(
                    f"length distribution {name!r} ({side}) must give {len(QUANTILES)} positive, "
                    "rising quantiles"
                )
            shapes.setdefault(str(name), {})[str(side)] = ratios
        named = set(frame["lengths"]) - {FIXED, UNIFORM, LOGNORMAL, UNKNOWN}
        unknown = sorted(n for n in named if n not in shapes)
        if unknown:
            raise DataError(
                f"client table {clients} names no such length distribution {unknown[0]!r}"
            )
        return cls(frame.set_index("client", drop=False), shapes)

    def names(self) -> tuple[str, ...]:
        """The clients' names."""
        return tuple(self.table.index)

    def shape(self, lengths: str, spread: float, side: str) -> np.ndarray:
        """The quantile ratios of ``lengths`` for ``side`` (``input`` / ``output``)."""
        if lengths == UNIFORM:
            s = 0.0 if not np.isfinite(spread) else float(spread)
            return 1.0 - s + 2.0 * s * QUANTILES
        if lengths == LOGNORMAL:
            return lognormal_ratios(spread)
        if lengths in (FIXED, UNKNOWN):
            # an unpublished shape: every request at the row's mean lengths (the means are known)
            return np.ones(len(QUANTILES))
        return self.shapes[lengths].get(side, np.ones(len(QUANTILES)))


# The standard normal quantiles of a lognormal's table, once (the standard library's: importing
# scipy.stats would add 1.5 s to every query).
_LOGNORMAL_Z = np.array([NormalDist().inv_cdf(q) for q in np.clip(QUANTILES, *LOGNORMAL_ENDS)])


def lognormal_ratios(spread: float) -> np.ndarray:
    """The ``QUANTILES`` of a lognormal length over its mean, ``spread`` the sigma of its log.

    exp(sigma z(q) - sigma^2 / 2), z the standard normal quantile; the ends at
    ``LOGNORMAL_ENDS``. A spread of 0 (or blank) is every request at the mean.
    """
    sigma = float(spread) if np.isfinite(spread) else 0.0
    return np.exp(sigma * _LOGNORMAL_Z - sigma**2 / 2.0)


def client_names(path: Path = SHIPPED_DATA_DIR / CLIENTS_FILE) -> frozenset[str]:
    """The names a client table lists (read without the checks of ``Clients.read``)."""
    return _names(path, "client")


def provenance_fields(value: object) -> list[str]:
    """The fields an ``inferred`` / ``unknown`` cell names (``|``-separated; [] when blank)."""
    if value is None or pd.isna(value):
        return []
    return [part.strip() for part in str(value).split("|") if part.strip()]


def client_kinds(path: Path = SHIPPED_DATA_DIR / CLIENTS_FILE) -> dict[str, str]:
    """Each client's ``kind`` (read without the checks of ``Clients.read``)."""
    try:
        frame = pd.read_csv(path, usecols=["client", "kind"], dtype=str)
    except (OSError, ValueError, pd.errors.ParserError) as exc:
        raise DataError(
            f"{path} is not a readable table with client and kind columns: {exc}"
        ) from None
    return kinds_of(frame)


def kinds_of(frame: pd.DataFrame) -> dict[str, str]:
    """The ``client`` -> ``kind`` map of a client table (rows missing either are left out)."""
    if not {"client", "kind"} <= set(frame.columns):
        return {}
    named = frame.dropna(subset=["client", "kind"])
    return dict(zip(named["client"].astype(str), named["kind"].astype(str), strict=True))


def distribution_names(path: Path = SHIPPED_DATA_DIR / LENGTHS_FILE) -> frozenset[str]:
    """The distributions a length table names (read without the checks of ``Clients.read``)."""
    return _names(path, "distribution")


def _names(path: Path, column: str) -> frozenset[str]:
    try:
        values = pd.read_csv(path, usecols=[column], dtype=str)[column]
    except (OSError, ValueError, pd.errors.ParserError) as exc:
        raise DataError(f"{path} is not a readable table with a {column} column: {exc}") from None
    return frozenset(values.dropna())


@cache
def clients(
    path: Path = SHIPPED_DATA_DIR / CLIENTS_FILE, lengths: Path = SHIPPED_DATA_DIR / LENGTHS_FILE
) -> Clients:
    """The client tables (default: the shipped ones), read once per process."""
    return Clients.read(path, lengths)
