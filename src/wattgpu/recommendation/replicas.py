"""Replicas: each GPU at each tensor-parallel size that holds the LLM, and the load one serves.

A candidate is a GPU and a tensor-parallel size ``t``: ``t`` GPUs that hold the weights and the
KV cache of at least one full-length sequence, with a kernel for the weights' format. Its
capacity is the highest load (request rate, or concurrent users of a closed loop) at which one
replica still meets every limit, with every lower load meeting them too
(:mod:`~wattgpu.recommendation.capacity`):

- ``itl`` and ``ttft``: the models' answers at ``num_gpus = t`` at the SLO's percentile (with
  ``strict``, the ITL's interval's upper end, times the tail's ratio to the median);
- ``memory``: the sequences in flight (Little's law at a rate: rate x output tokens x the
  median ITL; the users of a closed loop) within what the KV cache holds and the engine's batch.

All candidates are asked in one predictor call per target and pass (a coarse grid, then a finer
one inside each crossing's bracket). Pure: the predictor is the caller's.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from wattgpu.data.catalog import Catalog
from wattgpu.data.kernel_paths import NO_KERNEL
from wattgpu.errors import QueryError
from wattgpu.modeling.answering.domain import memory_fits
from wattgpu.modeling.answering.tails import TAILED
from wattgpu.modeling.physical.features import build_features
from wattgpu.modeling.physical.physics import ENGINE_MAX_BATCH
from wattgpu.recommendation.capacity import (
    UNBOUNDED,
    bracket,
    lowest_crossing,
    rate_grid,
    refined_grid,
    user_grid,
)
from wattgpu.recommendation.ranking import MEDIAN, Predictor, ask_checked, medians_of

# Tensor-parallel sizes a fleet may use: powers of two, as engines shard attention heads.
TP_SIZES = (1, 2, 4, 8, 16, 32, 64)
DEFAULT_TP = (1, 2, 4, 8)
# Points of the second, finer pass inside each crossing's bracket.
REFINE_POINTS = 8
# The loads a candidate's tails are asked at in one call, from its lowest not asked yet: the
# fewer, the fewer loads past its first miss are simulated, the more calls (``_Asker._tails``).
TAIL_CHUNK = 4
# How far beyond the physical most a replica could hold the first grid reaches (``first_grid``).
PAST_PHYSICS = 2.0


def check_tp(sizes: Sequence[Any], field: str = "tp") -> tuple[int, ...]:
    """Tensor-parallel sizes, each a power of two from 1 to 64; sorted, without repeats."""
    if not len(sizes):
        raise QueryError(f"{field} must name at least one size of {_tp_words()}; got none", "tp")
    out = set()
    for size in sizes:
        number = _whole(size)
        if number not in TP_SIZES:
            raise QueryError(f"{field} must be powers of two: {_tp_words()}; got {size!r}", "tp")
        out.add(number)
    return tuple(sorted(out))


def _tp_words() -> str:
    return ", ".join(str(t) for t in TP_SIZES)


def _whole(value: Any) -> int | None:
    """``value`` as an int if it is a whole number (``"2"``, 2, 2.0), else ``None``."""
    if isinstance(value, bool):
        return None
    try:
        number = float(str(value).strip())
    except ValueError:
        return None
    return int(number) if np.isfinite(number) and number.is_integer() else None


def candidates(
    catalog: Catalog, gpus: Sequence[str], tp: Sequence[int], workload: Mapping[str, Any]
) -> pd.DataFrame:
    """One row per (GPU, tensor-parallel size) with its physics features and whether it holds.

    ``workload``: the columns every query states (model, scenario, tokens, engine, dtype, and
    an LLM's config columns where a config describes it). Adds ``tp`` (= ``num_gpus``) and
    ``holds`` (the weights and one full-length sequence fit, and a kernel runs the format).
    """
    rows = pd.DataFrame([(g, t) for g in gpus for t in tp], columns=["gpu", "num_gpus"])
    phys = build_features(rows.assign(**workload), catalog)
    phys["tp"] = rows["num_gpus"].to_numpy(int)
    holds = memory_fits(phys["free_memory_gb"], phys["max_concurrent_seqs"], 1.0)
    phys["holds"] = holds & (phys["kernel_path"] != NO_KERNEL).to_numpy()
    return phys


def capacities(
    held: pd.DataFrame,
    predictor: Predictor,
    queries: Mapping[str, Any],
    slos: Mapping[str, float | None],
    *,
    closed: bool = False,
    percentile: int = MEDIAN,
    strict: bool = False,
    grid: np.ndarray | None = None,
    day: np.ndarray | None = None,
) -> pd.DataFrame:
    """Each candidate's capacity (req/s, or users with ``closed``) and the limit that binds it.

    Args:
        held: candidates that hold the LLM (``candidates``' rows with ``holds``), with ``gpu``,
            ``tp``, ``max_concurrent_seqs``.
        predictor: ``(queries, target) -> predictions``.
        queries: the columns every query states beside the GPU, its size and its load.
        slos: ``itl`` and ``ttft`` targets in ms (``None``: not held).
        closed: the load is concurrent users of a closed loop, not a request rate.
        percentile: the percentile both targets hold at.
        strict: hold the ITL target at the upper end of the ITL interval.
        grid: the loads of the first pass (default: ``first_grid``'s, per candidate).
        day: the loads the fleet must serve (each hour's rate, or the users); where given, the
            finer pass runs only where the fleet depends on it: where the replicas some load
            needs differ between the two ends of the capacity's bracket.

    Returns:
        ``capacity`` and ``binding_slo`` (``itl``, ``ttft``, ``memory``, or ``none`` where the
        grid's highest load meets every limit), indexed as ``held``.

    """
    if held.empty:
        return pd.DataFrame({"capacity": [], "binding_slo": []}, index=held.index)
    if grid is not None:
        loads = np.tile(np.asarray(grid, dtype=float), (len(held), 1))
    else:
        loads = first_grid(held, float(queries["output_tokens"]), closed)
    ask = _Asker(held, predictor, queries, slos, closed, percentile, strict)
    capacity, binding = lowest_crossing(loads, ask(loads))
    if grid is None:  # answers faster than the physics: on past the grid, up to the default's
        _beyond(held, loads, capacity, binding, ask, closed)
    refine = (capacity > 0) & (binding != UNBOUNDED)
    if day is not None:
        refine &= _fleet_depends(loads, capacity, np.asarray(day, dtype=float))
    if refine.any():
        low, high = bracket(loads[refine], capacity[refine])
        fine = refined_grid(low, high, REFINE_POINTS)
        if closed:
            fine = np.round(fine)
        sub = _Asker(held[refine], predictor, queries, slos, closed, percentile, strict)
        capacity[refine], binding[refine] = lowest_crossing(fine, sub(fine))
    if closed:  # whole users; a crossing a rounding error below a whole number is that number
        capacity = np.floor(capacity + 1e-9)
    return pd.DataFrame({"capacity": capacity, "binding_slo": binding}, index=held.index)


def _fleet_depends(loads: np.ndarray, capacity: np.ndarray, day: np.ndarray) -> np.ndarray:
    """Where the replicas of some load of ``day`` differ across the capacity's bracket."""
    low, high = bracket(loads, capacity)
    busy = day[day > 0][None, :]
    with np.errstate(divide="ignore", invalid="ignore"):
        fewest = np.ceil(busy / high[:, None] - 1e-9)
        most = np.ceil(busy / np.maximum(low, 1e-12)[:, None] - 1e-9)
    return (fewest != most).any(axis=1)


def _beyond(
    held: pd.DataFrame,
    loads: np.ndarray,
    capacity: np.ndarray,
    binding: np.ndarray,
    ask: _Asker,
    closed: bool,
) -> None:
    """Search on from the grid's end to the default grid's, where nothing bound (in place)."""
    end = (user_grid() if closed else rate_grid())[-1]
    beyond = (binding == UNBOUNDED) & (loads[:, -1] < end)
    if not beyond.any():
        return
    steps = np.linspace(0.0, 1.0, loads.shape[1])[None, :]
    start = np.log(loads[beyond, -1])[:, None]
    more = np.exp(start + (np.log(end) - start) * steps)
    if closed:
        more = np.maximum.accumulate(np.round(more), axis=1)
    sub = _Asker(
        held[beyond], ask.predictor, ask.queries, ask.slos, closed, ask.percentile, ask.strict
    )
    loads[beyond] = more
    capacity[beyond], binding[beyond] = lowest_crossing(more, sub(more))


def first_grid(held: pd.DataFrame, output_tokens: float, closed: bool) -> np.ndarray:
    """Each candidate's first-pass loads, up to ``PAST_PHYSICS`` x the most it could hold.

    A replica holds at most the sequences its KV cache and the engine's batch allow, and no
    step is shorter than reading its share of the weights at full bandwidth, so a rate beyond
    sequences / (output tokens x that time) misses the memory limit whatever the models say;
    the grid stops a factor ``PAST_PHYSICS`` beyond, spending no queries on loads that cannot
    be served (the serving loop's simulation costs the more, the more requests are in flight).
    """
    seqs = np.minimum(held["max_concurrent_seqs"].to_numpy(float), ENGINE_MAX_BATCH)
    if closed:
        end = user_grid()[-1]
        return np.stack([user_grid(int(min(end, max(2, np.ceil(PAST_PHYSICS * s))))) for s in seqs])
    read_s = held["dense_weight_bytes"].to_numpy(float) / held["tp"].to_numpy(float)
    read_s = read_s / (held["gpu_memory_bandwidth_gb_s"].to_numpy(float) * 1e9)
    with np.errstate(divide="ignore", invalid="ignore"):
        most = PAST_PHYSICS * seqs / (output_tokens * read_s)
    end = rate_grid()[-1]  # no further than the default grid (queries allow 10,000 req/s)
    most = np.where(np.isfinite(most) & (most > 0), np.minimum(most, end), end)
    return np.stack([rate_grid(min(0.05, m / 100), m) for m in most])


class _Asker:
    """Each limit's ratio (predicted / allowed) for every candidate at every load of a grid."""

    def __init__(
        self,
        held: pd.DataFrame,
        predictor: Predictor,
        queries: Mapping[str, Any],
        slos: Mapping[str, float | None],
        closed: bool,
        percentile: int,
        strict: bool,
    ) -> None:
        self.held, self.predictor, self.queries = held, predictor, dict(queries)
        self.slos, self.closed = slos, closed
        self.percentile, self.strict = percentile, strict
        # the targets held, in ms (a limit's ratio is the answer over it)
        self.limits = {name: float(ms) for name, ms in slos.items() if ms is not None}

    def __call__(self, loads: np.ndarray) -> dict[str, np.ndarray]:
        """``{limit: (candidates, loads) ratios}``, NaN (a miss) past a limit's first miss.

        The medians are asked first, without tails (``_tails`` then asks the percentile's).
        """
        n, m = loads.shape
        load_column = "concurrency" if self.closed else "request_rate_rps"
        frame = pd.DataFrame(
            {
                "gpu": np.repeat(self.held["gpu"].to_numpy(object), m),
                "num_gpus": np.repeat(self.held["tp"].to_numpy(float), m),
                load_column: loads.reshape(-1),
            }
        ).assign(**self.queries)
        itl = ask_checked(medians_of(self.predictor), frame, "itl")
        ratios = {"memory": self._in_flight(loads, itl) / self._held_seqs()[:, None]}
        if "itl" in self.limits:
            ratios["itl"] = self._itl(itl, MEDIAN).reshape(n, m) / self.limits["itl"]
        if "ttft" in self.limits:
            asked = _asked_up_to(ratios)
            ratios["ttft"] = self._ttft_medians(frame, asked) / self.limits["ttft"]
        return ratios if self.percentile == MEDIAN else self._tails(frame, ratios)

    def _tails(self, frame: pd.DataFrame, medians: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        """The latency limits' ratios at the percentile, asked load by load from the lowest.

        A tail (a simulated serving loop per query, most of the time) is no lower than its
        median, so a load where a limit's median or a tail known so far misses ends the
        candidate's search. The loads are asked ``TAIL_CHUNK`` at a time for every candidate
        still searching, ITL then TTFT, each up to the first miss known: the ratios up to each
        candidate's first miss are those of asking every load, NaN past it.
        """
        known = dict(medians)  # a latency's median ratio where its tail is not asked yet
        tails = {name: np.full(known[name].shape, np.nan) for name in TAILED if name in known}
        n, m = known["memory"].shape
        column = np.arange(m)[None, :]
        searching, start = np.ones(n, dtype=bool), 0
        while searching.any():
            chunk = searching[:, None] & (column >= start) & (column < start + TAIL_CHUNK)
            for name, tail in tails.items():
                asked = chunk & _asked_up_to(known)
                if asked.any():
                    answer = ask_checked(
                        self.predictor, frame[asked.reshape(-1)], name, self.percentile
                    )
                    tail[asked] = self._latency(answer, name) / self.limits[name]
                    known[name] = np.where(asked, tail, known[name])
            start += TAIL_CHUNK
            searching &= (_first_miss(known) >= start) & (start < m)
        return {**medians, **tails}

    def _ttft_medians(self, frame: pd.DataFrame, asked: np.ndarray) -> np.ndarray:
        """The median TTFT where ``asked`` (``(candidates, loads)``), NaN elsewhere."""
        out = np.full(asked.shape, np.nan)
        if asked.any():
            answer = ask_checked(medians_of(self.predictor), frame[asked.reshape(-1)], "ttft")
            out[asked] = _at(answer, MEDIAN)
        return out

    def _latency(self, answer: pd.DataFrame, target: str) -> np.ndarray:
        """``target``'s answer at the percentile, ms (ITL's as ``_itl`` reads it)."""
        return (
            self._itl(answer, self.percentile) if target == "itl" else _at(answer, self.percentile)
        )

    def _itl(self, answer: pd.DataFrame, percentile: int) -> np.ndarray:
        """ITL at ``percentile``, ms; with ``strict``, the interval's upper end scaled alike."""
        at = _at(answer, percentile)
        if not self.strict:
            return at
        median = answer["prediction"].to_numpy(float)
        return answer["upper"].to_numpy(float) * at / median

    def _in_flight(self, loads: np.ndarray, itl: pd.DataFrame) -> np.ndarray:
        """Sequences in flight: users, or rate x output tokens x the median ITL (s)."""
        if self.closed:
            return loads
        median_s = itl["prediction"].to_numpy(float).reshape(loads.shape) / 1000.0
        return loads * float(self.queries["output_tokens"]) * median_s

    def _held_seqs(self) -> np.ndarray:
        """The sequences a replica can run at once: its KV cache's, at most the engine's batch."""
        return np.minimum(self.held["max_concurrent_seqs"].to_numpy(float), ENGINE_MAX_BATCH)


def _asked_up_to(ratios: Mapping[str, np.ndarray]) -> np.ndarray:
    """Loads up to each candidate's first miss of the limits known so far, that one included.

    A later limit need not be asked beyond it: the search ends there whatever it says.
    """
    first = _first_miss(ratios)
    return np.arange(next(iter(ratios.values())).shape[1])[None, :] <= first[:, None]


def _first_miss(ratios: Mapping[str, np.ndarray]) -> np.ndarray:
    """Each candidate's first load where a limit misses (a ratio over 1 or NaN); past: the count."""
    missed = np.any([~(r <= 1.0) for r in ratios.values()], axis=0)
    return np.where(missed.any(axis=1), missed.argmax(axis=1), missed.shape[1])


def _at(answer: pd.DataFrame, percentile: int) -> np.ndarray:
    """A latency answer at ``percentile`` (the median's ``prediction``, else ``p90``/``p99``)."""
    column = "prediction" if percentile == MEDIAN else f"p{percentile}"
    return pd.to_numeric(answer[column]).to_numpy(float)
