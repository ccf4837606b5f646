"""A per-request TTFT overhead and a prefill efficiency, fitted on TTFT rows against the simulation.

Two terms per group of rows (an engine release line; a GPU x engine line in the fidelity bench):

* an overhead ``o`` (s) added to every request's TTFT: the API server, tokenisation and
  scheduling that a request pays before its prefill, what one to four users already show
  (serving_dynamics.md F: 65-250 ms by engine);
* a prefill efficiency ``g``, a factor on the prompt tokens' tensor work over the prior's
  (``run.PROMPT_SCALE``): 1 is the prior's own kernels, 2 a prefill twice as slow.

The rows are simulated once per efficiency of ``EFFICIENCIES`` (a row's simulation depends on its
own inputs only), or at the coarser ``KNOTS`` with the efficiencies between read off a line
through the two nearest in logs (what a fold of the simulated prior does: a fifth of the
simulations), then each group's terms are chosen on those arrays alone: for each ``g`` the
``o >= 0`` of least absolute error relative to the measurement (a fast row weighs as much as a
slow one), and the ``g`` of the lowest median error (ties to the one nearest 1). A fold's fit
is then arithmetic, not simulation. ``g`` is the check on the client: a client that overstates
the waves of prompts needs a prefill faster than the GPU can run (``g`` well below 1).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from wattgpu.data.clients import clients
from wattgpu.modeling.physical.operations import Rows, length
from wattgpu.modeling.physical.physics import DEFAULT_CONSTANTS, PhysicalConstants
from wattgpu.modeling.serving.run import PROMPT_SCALE, simulate_rows
from wattgpu.modeling.serving.workload import client_names

# The prefill efficiencies tried: 1/8 to 8 in steps of sqrt(2).
EFFICIENCIES = 2.0 ** np.arange(-3.0, 3.01, 0.5)
# The efficiencies a fold simulates, every third of them: on 300 shipped TTFT rows the log-linear
# reading between two knots is within 3 % of the simulation for 90 % of rows (21 % at worst).
KNOTS = EFFICIENCIES[::3]
# The simulated column of each TTFT statistic a client reports.
TTFT_OF_STATISTIC = {"median": "ttft_p50_s", "mean": "ttft_mean_s"}
# Rows a group needs before its terms are fitted (two fix both, more make them steady).
MIN_TERM_ROWS = 4
# A tie-break: of two efficiencies within this MdAPE (a fraction), the one nearer 1.
_TIE = 1e-3


@dataclass(frozen=True)
class TtftTerms:
    """One group's fitted terms and their in-sample error.

    Attributes:
        efficiency: the prefill efficiency ``g`` (a factor on prompt tokens' tensor work).
        overhead_s: the overhead ``o`` added to every request's TTFT, s.
        rows: the rows it was fitted on.
        mdape: its MdAPE on them, %.

    """

    efficiency: float
    overhead_s: float
    rows: int
    mdape: float


def simulated_ttft(rows: Rows, sim: pd.DataFrame) -> np.ndarray:
    """Each row's simulated TTFT in the statistic its client reports."""
    statistic = clients().table["ttft_statistic"]
    named = [str(name) for name in client_names(rows)]
    means = statistic.reindex(named).to_numpy(object) == "mean"
    return np.where(means, sim[TTFT_OF_STATISTIC["mean"]], sim[TTFT_OF_STATISTIC["median"]])


def simulate_efficiencies(
    rows: Rows,
    constants: PhysicalConstants = DEFAULT_CONSTANTS,
    knots: np.ndarray = EFFICIENCIES,
) -> np.ndarray:
    """Each row's simulated TTFT (its client's statistic) at each of ``EFFICIENCIES``, (n, E).

    Simulated at each of ``knots`` (a subset of ``EFFICIENCIES``, from the first to the last),
    the efficiencies between read off ``between_knots``.
    """
    frame = pd.DataFrame(rows) if not isinstance(rows, pd.DataFrame) else rows
    out = np.full((length(frame), len(knots)), np.nan)
    for j, efficiency in enumerate(knots):
        scaled = frame.assign(**{PROMPT_SCALE: efficiency})
        out[:, j] = simulated_ttft(scaled, simulate_rows(scaled, constants))
    return between_knots(out, knots)


def between_knots(at_knots: np.ndarray, knots: np.ndarray) -> np.ndarray:
    """``(n, K)`` TTFTs at ``knots`` as ``(n, E)`` at ``EFFICIENCIES``, linear in logs between.

    A row with a blank or non-positive knot is blank throughout.
    """
    if len(knots) == len(EFFICIENCIES) and np.allclose(knots, EFFICIENCIES):
        return at_knots
    ok = np.isfinite(at_knots).all(axis=1) & (at_knots > 0).all(axis=1)
    out = np.full((len(at_knots), len(EFFICIENCIES)), np.nan)
    log_knots, log_all = np.log(knots), np.log(EFFICIENCIES)
    for i in np.flatnonzero(ok):
        out[i] = np.exp(np.interp(log_all, log_knots, np.log(at_knots[i])))
    return out


def best_overhead(measured: np.ndarray, simulated: np.ndarray) -> float:
    """The ``o >= 0`` minimising sum(|simulated + o - measured| / measured), s.

    The weighted median of ``measured - simulated`` with weights ``1 / measured``: the absolute
    error, like the MdAPE that scores it, is not pulled by a few rows the simulation misses.
    """
    gap = measured - simulated
    order = np.argsort(gap)
    weight = (1.0 / measured)[order]
    half = np.searchsorted(np.cumsum(weight), 0.5 * weight.sum())
    return max(0.0, float(gap[order][min(half, len(gap) - 1)]))


def fit_group(measured: np.ndarray, simulated: np.ndarray, held: float | None = None) -> TtftTerms:
    """The terms of one group: ``measured`` TTFT (n,), ``simulated`` at each efficiency (n, E).

    ``held``: the efficiency held at this one of ``EFFICIENCIES`` (the overhead alone fitted);
    None: both fitted.
    """
    best: tuple[float, float, float, float] | None = None
    tried = EFFICIENCIES if held is None else EFFICIENCIES[EFFICIENCIES == held]
    for efficiency in tried:
        j = int(np.argmin(np.abs(EFFICIENCIES - efficiency)))
        overhead = best_overhead(measured, simulated[:, j])
        error = float(np.median(np.abs(simulated[:, j] + overhead - measured) / measured))
        key = error + _TIE * abs(np.log2(efficiency))
        if best is None or key < best[0]:
            best = (key, float(efficiency), overhead, error)
    assert best is not None
    return TtftTerms(best[1], best[2], len(measured), 100.0 * best[3])


def fit_terms(
    groups: np.ndarray,
    measured: np.ndarray,
    simulated: np.ndarray,
    pooled_efficiency: float | None = None,
) -> dict[str, TtftTerms]:
    """Per group with at least ``MIN_TERM_ROWS`` usable rows, its ``TtftTerms``; ``""``: pooled.

    Args:
        groups: each row's group (an engine line, or a GPU x engine line).
        measured: each row's measured TTFT, s (NaN: not measured).
        simulated: ``simulate_efficiencies``' array of the same rows.
        pooled_efficiency: the pooled terms' efficiency held at this (their overhead fitted at
            it); None: fitted too.

    """
    usable = np.isfinite(measured) & (measured > 0) & np.isfinite(simulated).all(axis=1)
    fitted: dict[str, TtftTerms] = {}
    if usable.sum() >= MIN_TERM_ROWS:
        fitted[""] = fit_group(measured[usable], simulated[usable], pooled_efficiency)
    for group in np.unique(groups[usable]):
        mine = usable & (groups == group)
        if mine.sum() >= MIN_TERM_ROWS:
            fitted[str(group)] = fit_group(measured[mine], simulated[mine])
    return fitted


def with_terms(
    groups: np.ndarray, fitted: dict[str, TtftTerms], simulated: np.ndarray
) -> np.ndarray:
    """Each row's TTFT under its group's terms (the pooled ones where its group has none), s."""
    out = np.full(len(groups), np.nan)
    for group in np.unique(groups):
        terms = fitted.get(str(group), fitted.get(""))
        if terms is None:
            continue
        mine = groups == group
        column = int(np.argmin(np.abs(EFFICIENCIES - terms.efficiency)))
        out[mine] = simulated[mine, column] + terms.overhead_s
    return out
