"""How far a query lies from the rows a model was trained on; how much of its correction it keeps.

The trees learn a correction to the analytical prior (the targets are log-ratios to it). Inside
the training data the correction is what makes the answer accurate; far outside it the trees
answer with whatever leaf the query happens to fall in, which can be worse than the physics alone
(on leave-one-source-out, the ITL trees were off by 58 % where the prior alone was off by 23 %).
So the correction is shrunk towards zero -- the answer towards the prior of the query's own
features -- as the query leaves the training data: ``trust x correction x exp(-distance /
scale)``. ``trust`` is a tuned hyperparameter (``correction_weight``): even at no distance, the
corrections learnt on some data sources are partly the habits of those sources, and a share of
them below one answered held-out GPUs and sources better (``bench/ablation.py``).

The distance adds, in decades, how far each physical quantity of ``DIMENSIONS`` lies outside the
range the training rows span, and one for a serving engine the training rows never ran. A
scenario (offline, server) the training rows never had keeps none of the correction, at any
scale: the trees learnt it on another kind of load only (leave-one-source-out power: the fold
without ML.ENERGY 2024-25 trains on offline rows alone, and their correction took its server rows
from the prior's 10.6 % to 15.5 % MdAPE, docs/accuracy.md). Pure functions; the ranges travel
with the model (``Familiarity.to_dict``) so that the served model and every evaluation shrink
alike.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

# The quantities a query's novelty is measured in (log10): the GPU's bandwidth and tensor peak,
# the LLM's size, the load and the tokens, and the GPUs it is spread over.
DIMENSIONS = (
    "gpu_memory_bandwidth_gb_s",
    "tensor_tflops",
    "llm_params_b",
    "llm_active_params_b",
    "concurrency",
    "input_tokens",
    "output_tokens",
    "num_gpus",
)
# The distance an engine the model never saw adds (one decade's worth), and a release of a seen
# engine from a year the model never saw (as much: a release's scheduler, host time and kernels
# are its own). Measured on leave-one-source-out ITL (``docs/model.md``): 0.5 took offline /
# server from 35.6 / 31.6 % to 31.1 / 24.5 %, 1.0 to 28.4 / 24.4 %.
UNSEEN_ENGINE = 1.0
UNSEEN_RELEASE = 1.0


@dataclass(frozen=True)
class Familiarity:
    """The ranges (log10) and engines of a model's training rows.

    Attributes:
        ranges: per dimension of ``DIMENSIONS``, [low, high] in log10 (NaN: not known).
        engines: the serving engines of the training rows.
        releases: their engine release families (``engine@year``; empty: not recorded).
        scale: the distance (in decades) at which the correction keeps 1/e of itself; infinite
            keeps it whole (no shrinking).
        trust: the share of the correction kept at no distance.
        scenarios: the training rows' scenarios; a row of another keeps no correction (empty:
            not recorded, every scenario keeps it).

    """

    ranges: Mapping[str, tuple[float, float]]
    engines: tuple[str, ...]
    scale: float
    trust: float = 1.0
    releases: tuple[str, ...] = ()
    scenarios: tuple[str, ...] = ()

    @classmethod
    def of(
        cls, rows: pd.DataFrame | Mapping[str, Any], scale: float, trust: float = 1.0
    ) -> Familiarity:
        """What the training ``rows`` (with features) span."""
        ranges = {}
        for column in DIMENSIONS:
            values = _log10(rows, column)
            values = values[np.isfinite(values)]
            ranges[column] = (
                (float(values.min()), float(values.max())) if len(values) else (np.nan, np.nan)
            )
        engines = tuple(sorted({str(e) for e in pd.Series(rows["engine"]).dropna()}))
        releases = tuple(sorted(set(_releases(rows))))
        given = pd.Series(rows["scenario"] if "scenario" in rows else [], dtype=object)
        scenarios = tuple(sorted({str(s) for s in given.dropna()}))
        return cls(ranges, engines, float(scale), float(trust), releases, scenarios)

    def distance(self, rows: pd.DataFrame | Mapping[str, Any]) -> np.ndarray:
        """Each row's distance from the training rows: decades outside, plus unseen engines."""
        total = np.zeros(_count(rows))
        for column, (low, high) in self.ranges.items():
            values = _log10(rows, column)
            outside = np.maximum(np.maximum(low - values, values - high), 0.0)
            total += np.where(np.isfinite(outside), outside, 0.0)
        engines = np.asarray(rows["engine"], dtype=object) if "engine" in rows else None
        if engines is not None and self.engines:
            unseen = ~np.isin(engines.astype(str), self.engines)
            total += UNSEEN_ENGINE * unseen
            if self.releases and "engine_year" in rows:
                new = ~np.isin(_releases(rows), self.releases)
                total += UNSEEN_RELEASE * (new & ~unseen)
        return total

    def weight(self, rows: pd.DataFrame | Mapping[str, Any]) -> np.ndarray:
        """The share of the learnt correction each row keeps, in [0, ``trust``]."""
        if np.isfinite(self.scale):
            kept = self.trust * np.exp(-self.distance(rows) / self.scale)
        else:
            kept = np.full(_count(rows), self.trust)
        if self.scenarios and "scenario" in rows:
            seen = np.isin(np.asarray(rows["scenario"], dtype=object).astype(str), self.scenarios)
            kept = np.where(seen, kept, 0.0)
        return kept

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready (for the model card)."""
        return {
            "ranges": {k: list(v) for k, v in self.ranges.items()},
            "engines": list(self.engines),
            "scale": self.scale if np.isfinite(self.scale) else None,
            "trust": self.trust,
            "releases": list(self.releases),
            "scenarios": list(self.scenarios),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Familiarity:
        """The inverse of ``to_dict``."""
        scale = data.get("scale")
        return cls(
            {k: (float(v[0]), float(v[1])) for k, v in data["ranges"].items()},
            tuple(data["engines"]),
            float("inf") if scale is None else float(scale),
            float(data.get("trust", 1.0)),
            tuple(data.get("releases", ())),
            tuple(data.get("scenarios", ())),
        )


def _releases(rows: pd.DataFrame | Mapping[str, Any]) -> np.ndarray:
    """Each row's engine release family, ``engine@year`` (``engine@?`` without a year)."""
    engines = np.asarray(rows["engine"], dtype=object).astype(str)
    if "engine_year" not in rows:
        return np.char.add(engines, "@?")
    years = np.asarray(pd.to_numeric(np.asarray(rows["engine_year"]), errors="coerce"))
    text = np.array(["?" if y != y else str(int(y)) for y in years], dtype=object).astype(str)
    return np.char.add(np.char.add(engines, "@"), text)


def _count(rows: pd.DataFrame | Mapping[str, Any]) -> int:
    """The number of rows of a frame or of columns."""
    return len(rows) if isinstance(rows, pd.DataFrame) else len(next(iter(rows.values())))


def _log10(rows: pd.DataFrame | Mapping[str, Any], column: str) -> np.ndarray:
    if column not in rows:
        return np.full(_count(rows), np.nan)
    values = np.asarray(pd.to_numeric(np.asarray(rows[column]), errors="coerce"), dtype=float)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(values > 0, np.log10(values), np.nan)
