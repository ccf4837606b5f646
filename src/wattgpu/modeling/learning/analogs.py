"""Measured analogs of a query: the same workload measured on other GPUs, or by a sibling LLM.

A practitioner with a GPU nobody measured takes a measurement of the same workload on a similar
GPU and scales it by what differs. This module finds those measurements among the training rows
(the ``Evidence``) and says what they imply for each query row, pure numpy:

- an analog shares the query's scenario, weight format, engine, GPU count and LLM family
  (``KEY_COLUMNS``); its load (``concurrency``) and its input and output tokens are each within
  ``WITHIN`` of the query's; it is never the query's own (LLM, GPU) pair: the same LLM on
  another GPU, or a sibling LLM on any GPU, so no row is its own analog and a row's analogs are
  those its GPU (or LLM) would have if nobody had measured it;
- its *residual* is ``log(measured / prior)``: how far the physics prior was off on it. The
  prior's ratio between two GPUs carries over to the query, the residual anchors it;
- its *distance* adds, in natural-log units, how far its GPU is (bandwidth and tensor peak), its
  LLM (0 for the same LLM, else the ratio of active parameters plus ``OTHER_LLM``), its load and
  tokens, and its engine release (``PER_ENGINE_YEAR`` a year); its weight is
  ``exp(-distance / SCALE)`` times a taper that falls from 1 at the query's own load and tokens
  to 0 at the edge of ``WITHIN`` (``1 - |log ratio| / log WITHIN``, per load, input and output),
  so that an answer never jumps as a query's load crosses an analog's window.

``find`` returns, per query row, the weighted residual, the weighted measured value (unscaled),
their spread, the analogs' count and weighted distance, and the closest analog's GPU. With no
analog the residual is blank. ``blended`` mixes the residual into the trees' correction by how
far the analogs can be trusted (``trust``); with none the answer is the trees' alone.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from wattgpu.arrays import blanks
from wattgpu.modeling.physical.features import ANALOG_FEATURES
from wattgpu.modeling.physical.targets import PRIOR_COLUMN

# What an analog shares with its query exactly.
KEY_COLUMNS = ("scenario", "dtype", "engine", "num_gpus", "llm_family")
# The numbers an analog is near its query in, as logs (``_logs``).
NEAR_COLUMNS = ("bandwidth", "tflops", "active_params", "load", "input", "output")
# An analog's load and its input and output tokens are each within this factor of the query's.
WITHIN = 2.0
# Distance of a sibling LLM (same family, other size) beyond its size ratio: a measurement of the
# same LLM on another GPU is the closer evidence.
OTHER_LLM = 0.5
# Distance per year between the engine releases.
PER_ENGINE_YEAR = 0.25
# The distance at which an analog weighs 1/e of an exact twin's.
SCALE = 0.5
# How far an answer trusts its analogs (``trust``): as if this many rows vouched for the trees'
# correction, and half as much when the analogs' residuals spread by this much (log units); each
# (far, near) by the analogs' GPU distance, near meaning measured on the query's own GPU (or a
# twin), at 1/e between the two at ``NEAR_GPU``. Chosen with CatBoost defaults on LOGO, LOLO and
# CV (docs/model.md has the figures).
TREES_AS_ROWS = (0.5, 0.1)
DISAGREEMENT = (0.1, 0.4)
NEAR_GPU = 0.2
# The model's inputs that ``with_analogs`` adds to a query's rows.
RESIDUAL, SPREAD, COUNT, DISTANCE, GPU_DISTANCE = ANALOG_FEATURES
# What the evidence keeps of each training row (and the served model ships).
EVIDENCE_COLUMNS = (*KEY_COLUMNS, "model", "gpu", "engine_year", *NEAR_COLUMNS, "residual", "value")


@dataclass(frozen=True)
class Analogs:
    """What the analogs of each query row say (NaN residual, value and spread where none).

    Attributes:
        residual: the weighted ``log(measured / prior)`` of the analogs.
        value: their weighted measured value, unscaled (the practitioner's plain copy).
        spread: the weighted standard deviation of their residuals.
        count: how many analogs there are, each counted by its taper (the effective count).
        rows: how many analogs there are, whole.
        distance: their weighted distance from the query.
        gpu_distance: the part of it their GPUs make (bandwidth and tensor peak).
        gpu: the closest analog's GPU ('' where none).
        same_llm: whether the closest analog ran the query's own LLM.

    """

    residual: np.ndarray
    value: np.ndarray
    spread: np.ndarray
    count: np.ndarray
    rows: np.ndarray
    distance: np.ndarray
    gpu_distance: np.ndarray
    gpu: np.ndarray
    same_llm: np.ndarray

    @classmethod
    def none(cls, n: int) -> Analogs:
        """``n`` rows with no analog."""
        blank, zero = np.full(n, np.nan), np.zeros(n)
        return cls(blank, blank, blank, zero, zero, blank, blank, np.full(n, "", object), zero > 0)

    def columns(self) -> dict[str, np.ndarray]:
        """The model's inputs (``ANALOG_FEATURES``)."""
        return {
            RESIDUAL: self.residual,
            SPREAD: self.spread,
            COUNT: self.count,
            DISTANCE: self.distance,
            GPU_DISTANCE: self.gpu_distance,
        }

    def support(self) -> np.ndarray:
        """Each row's support in words: "5 rows, closest on NVIDIA B200, same LLM" ('' if none)."""
        out = np.full(len(self.rows), "", dtype=object)
        for i in np.flatnonzero(self.count > 0):
            rows = "row" if self.rows[i] == 1 else "rows"
            llm = "same LLM" if self.same_llm[i] else "a sibling LLM"
            out[i] = f"{int(self.rows[i])} {rows}, closest on {self.gpu[i]}, {llm}"
        return out


@dataclass(frozen=True)
class Evidence:
    """The training rows an answer may lean on: keys, nearness, residual (``EVIDENCE_COLUMNS``)."""

    table: dict[str, np.ndarray]

    @classmethod
    def of(cls, target: str, frame: pd.DataFrame | Mapping[str, Any]) -> Evidence:
        """The evidence of rows with features (``build_features``) and ``target`` measured."""
        measured, prior = PRIOR_COLUMN[target]
        value = np.asarray(frame[measured], dtype=float)
        with np.errstate(divide="ignore", invalid="ignore"):
            residual = np.log(value / np.asarray(frame[prior], dtype=float))
        keep = np.isfinite(residual)
        table = {c: v[keep] for c, v in _keys(frame).items()}
        table["residual"], table["value"] = residual[keep], value[keep]
        return cls(table)

    def __len__(self) -> int:
        return len(self.table["residual"])

    @functools.cached_property
    def _by_key(self) -> dict[tuple, np.ndarray]:
        """The positions of the rows of each key (``KEY_COLUMNS``), found once per evidence."""
        codes, keys = _key_codes(self.table)
        order = np.argsort(codes, kind="stable")
        bounds = np.searchsorted(codes[order], np.arange(len(keys) + 1))
        return {key: order[bounds[i] : bounds[i + 1]] for i, key in enumerate(keys)}

    def to_frame(self) -> pd.DataFrame:
        """A frame of ``EVIDENCE_COLUMNS`` (what the served model ships)."""
        return pd.DataFrame({c: self.table[c] for c in EVIDENCE_COLUMNS})

    @classmethod
    def from_frame(cls, frame: pd.DataFrame) -> Evidence:
        """The inverse of ``to_frame``."""
        text = {*KEY_COLUMNS, "model", "gpu"} - {"num_gpus"}
        return cls(
            {
                c: frame[c].to_numpy(dtype=object) if c in text else frame[c].to_numpy(float)
                for c in EVIDENCE_COLUMNS
            }
        )

    def find(self, rows: pd.DataFrame | Mapping[str, Any]) -> Analogs:
        """The analogs of each of ``rows`` (with features) among this evidence."""
        asked = _keys(rows)
        n = len(asked["gpu"])
        # weight, w x residual, w x residual^2, w x value, w x distance, w x GPU distance
        sums = np.zeros((n, 6))
        counts = np.zeros((n, 2))  # tapered and whole
        best = np.full(n, np.inf)
        best_at = np.full(n, -1)
        codes, keys = _key_codes(asked)
        for code, key in enumerate(keys):
            candidates = self._by_key.get(key)
            if candidates is not None:
                queries = np.flatnonzero(codes == code)
                _accumulate(asked, self.table, queries, candidates, sums, counts, best, best_at)
        weight = sums[:, 0]
        some = weight > 0
        with np.errstate(divide="ignore", invalid="ignore"):
            residual = np.where(some, sums[:, 1] / weight, np.nan)
            variance = np.where(some, sums[:, 2] / weight - residual**2, np.nan)
            value = np.where(some, sums[:, 3] / weight, np.nan)
            distance = np.where(some, sums[:, 4] / weight, np.nan)
            gpu_distance = np.where(some, sums[:, 5] / weight, np.nan)
        gpu, same = np.full(n, "", dtype=object), np.zeros(n, dtype=bool)
        closest = best_at[some]  # every row with weight has a closest analog
        gpu[some] = self.table["gpu"][closest]
        same[some] = self.table["model"][closest] == asked["model"][some]
        spread = np.sqrt(np.maximum(variance, 0.0))
        count, rows = counts[:, 0], counts[:, 1]
        return Analogs(residual, value, spread, count, rows, distance, gpu_distance, gpu, same)


def find_in(evidence: Evidence | None, rows: Any) -> Analogs:
    """The analogs of ``rows`` in ``evidence``; without evidence, none for any row."""
    if evidence is not None:
        return evidence.find(rows)
    return Analogs.none(len(np.asarray(rows["gpu"])))


def attach(rows: Any, analogs: Analogs) -> Any:
    """``rows`` (a frame or columns) with the analogs' inputs (``ANALOG_FEATURES``) beside."""
    if isinstance(rows, pd.DataFrame):
        return rows.assign(**analogs.columns())
    return {**rows, **analogs.columns()}


def with_analogs(rows: Any, evidence: Evidence | None) -> Any:
    """``rows`` (with features) and their analogs' inputs in ``evidence`` (none without it)."""
    return attach(rows, find_in(evidence, rows))


def trust(columns: Mapping[str, np.ndarray]) -> np.ndarray:
    """The weight of the analogs' residual in a row's answer, 0 where it has none.

    ``count / (count + k) / (1 + spread / s)``: many agreeing analogs outweigh the trees, one
    analog or a scattered few do not. ``k`` and ``s`` go from their far values
    (``TREES_AS_ROWS``, ``DISAGREEMENT``) to their near ones as ``exp(-gpu_distance / NEAR_GPU)``:
    siblings measured on the query's own GPU share its quirks, and are trusted more.
    """
    count = np.asarray(columns[COUNT], dtype=float)
    spread = np.nan_to_num(np.asarray(columns[SPREAD], dtype=float))
    gpu = np.nan_to_num(np.asarray(columns[GPU_DISTANCE], dtype=float), nan=np.inf)
    near = np.exp(-gpu / NEAR_GPU)
    rows = TREES_AS_ROWS[0] + (TREES_AS_ROWS[1] - TREES_AS_ROWS[0]) * near
    disagreement = DISAGREEMENT[0] + (DISAGREEMENT[1] - DISAGREEMENT[0]) * near
    with np.errstate(divide="ignore", invalid="ignore"):
        weight = count / (count + rows) / (1.0 + spread / disagreement)
    return np.where(count > 0, weight, 0.0)


def blended(correction: np.ndarray, columns: Mapping[str, np.ndarray]) -> np.ndarray:
    """The trees' ``correction`` (log-ratio to the prior) blended with the analogs' residual."""
    weight = trust(columns)
    residual = np.nan_to_num(np.asarray(columns[RESIDUAL], dtype=float))
    return weight * residual + (1.0 - weight) * np.asarray(correction, dtype=float)


def _accumulate(
    asked: Mapping[str, np.ndarray],
    known: Mapping[str, np.ndarray],
    queries: np.ndarray,
    candidates: np.ndarray,
    sums: np.ndarray,
    counts: np.ndarray,
    best: np.ndarray,
    best_at: np.ndarray,
) -> None:
    """Add the weighted sums of ``candidates``' analogs of ``queries`` (one key) to ``sums``.

    ``counts`` gets their tapered and their whole count; ``best`` and ``best_at`` the closest.
    """

    def apart(column: str) -> tuple[np.ndarray, np.ndarray]:
        """|difference|, 0 between two blanks; and whether only one side is blank."""
        mine, theirs = asked[column][queries, None], known[column][None, candidates]
        one_blank = np.isnan(mine) != np.isnan(theirs)
        return np.nan_to_num(np.abs(mine - theirs)), one_blank

    same_llm = asked["model"][queries, None] == known["model"][None, candidates]
    same_gpu = asked["gpu"][queries, None] == known["gpu"][None, candidates]
    ok = ~(same_gpu & same_llm)
    distance = np.zeros(ok.shape)
    taper = np.ones(ok.shape)
    for column in ("load", "input", "output"):
        gap, one_blank = apart(column)
        ok &= ~one_blank & (gap <= np.log(WITHIN))
        distance += gap
        taper *= np.clip(1.0 - gap / np.log(WITHIN), 0.0, 1.0)
    gpu = apart("bandwidth")[0] + apart("tflops")[0]
    distance += gpu
    distance += np.where(same_llm, 0.0, apart("active_params")[0] + OTHER_LLM)
    distance += apart("engine_year")[0] * PER_ENGINE_YEAR
    weight = np.where(ok, np.exp(-distance / SCALE) * taper, 0.0)
    residual = known["residual"][None, candidates]
    sums[queries, 0] += weight.sum(axis=1)
    sums[queries, 1] += (weight * residual).sum(axis=1)
    sums[queries, 2] += (weight * residual**2).sum(axis=1)
    sums[queries, 3] += (weight * known["value"][None, candidates]).sum(axis=1)
    sums[queries, 4] += (weight * distance).sum(axis=1)
    sums[queries, 5] += (weight * gpu).sum(axis=1)
    counts[queries, 0] += np.where(ok, taper, 0.0).sum(axis=1)
    counts[queries, 1] += ok.sum(axis=1)
    masked = np.where(ok, distance, np.inf)
    nearest = masked.argmin(axis=1)
    least = masked[np.arange(len(queries)), nearest]
    closer = least < best[queries]
    best[queries[closer]] = least[closer]
    best_at[queries[closer]] = candidates[nearest[closer]]


def _keys(rows: pd.DataFrame | Mapping[str, Any]) -> dict[str, np.ndarray]:
    """``rows``' evidence columns but residual and value: keys as text, nearness as logs."""
    out: dict[str, np.ndarray] = {}
    for column in (*KEY_COLUMNS, "model", "gpu"):
        values = np.asarray(rows[column]) if column in rows else np.full(len(rows["gpu"]), None)
        out[column] = values.astype(float) if column == "num_gpus" else _texts(values)
    out["engine_year"] = np.asarray(rows["engine_year"], dtype=float)
    out.update(_logs(rows))
    return out


def _logs(rows: pd.DataFrame | Mapping[str, Any]) -> dict[str, np.ndarray]:
    """The logs of the numbers an analog is near its query in (``NEAR_COLUMNS``)."""

    def log(column: str, fallback: str | None = None) -> np.ndarray:
        values = np.asarray(rows[column], dtype=float)
        if fallback is not None:
            values = np.where(np.isfinite(values), values, np.asarray(rows[fallback], dtype=float))
        with np.errstate(divide="ignore", invalid="ignore"):
            return np.where(values > 0, np.log(values), np.nan)

    return {
        "bandwidth": log("gpu_memory_bandwidth_gb_s"),
        "tflops": log("tensor_tflops"),
        "active_params": log("llm_active_params_b", "llm_params_b"),
        "load": log("concurrency"),
        "input": log("input_tokens"),
        "output": log("output_tokens"),
    }


def _texts(values: np.ndarray) -> np.ndarray:
    """Text labels as given, blank as ''."""
    out = np.asarray(values, dtype=object)
    blank = blanks(out)
    return np.where(blank, "", out) if blank.any() else out


def _key_codes(table: Mapping[str, np.ndarray]) -> tuple[np.ndarray, list[tuple]]:
    """Each row's code (a position in the keys), and the distinct keys (``KEY_COLUMNS``)."""
    index: dict[tuple, int] = {}
    rows = zip(*(table[c].tolist() for c in KEY_COLUMNS), strict=True)
    codes = np.fromiter((index.setdefault(key, len(index)) for key in rows), dtype=np.intp)
    return codes, list(index)
