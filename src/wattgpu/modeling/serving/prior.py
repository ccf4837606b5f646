"""The simulated prior: each row's own harness simulated, with terms fitted on training rows.

Like with like: each row's ITL and TTFT prior is the simulated statistic its source measured
(the median gap, a request's mean TPOT, or a latency per output token that counts the prefill;
a TTFT mean or median, by its client), never a conversion of the measurement. The simulation's
step costs are the prior's; the terms fitted on a fold's training rows are few:

* per engine release line, its host time per step (``host.fit_host_time``: a scale on the
  table's fixed part and a time per sequence), fitted inside the simulation: the rows simulated
  without host time, what they measured beyond it regressed on the batch;
* per engine release line, its TTFT terms (``ttft_terms``): a prefill efficiency on the prompt
  tokens' tensor work and a per-request overhead added to every TTFT, fitted jointly inside the
  simulation with that host time, on at most ``TERM_ROWS`` of the line's training TTFT rows (a
  line with fewer than ``ttft_terms.MIN_TERM_ROWS`` runs the prior's own prefill and pays the
  median line's overhead); its rows are then simulated at their line's efficiency;
* per engine release line, a scale on the simulated ITL of that simulation (the median ratio of
  measured to simulated over the line's training rows; a line with fewer than ``MIN_LINE_ROWS``
  rows takes the scale of all of them);
* power per GPU ``idle + (TDP - idle) x min(1, weight x busy)``, ``busy`` the simulated GPUs'
  busy share of the measured window, ``idle = idle_share x TDP``: the two numbers on a grid,
  fitted on the rows that take them. An open-loop server (a request rate) keeps the closed
  form's power: a busy share says how long the GPU works, not how hard, and such a server's
  steps are small decodes with idle gaps, whose draw the closed form's step load and its fitted
  ``server_power_factor`` hold (on the simulated busy share alone its prior's error was 52 % on
  held-out GPUs against the closed form's 13 %: docs/model.md).

As a recipe's prior (``config.PRIORS``, beside ``closed-form``, the analytical serving regimes
of ``physical.physics``; ``config.TARGET_PRIORS`` names each target's own): a fold's rows get
the closed-form columns first (the features the trees read beside the prior: concurrency,
prefill share, bandwidth latency), then the simulated prior replaces the prior's own columns
(``with_simulated_prior``), its simulation at the fold's fitted constants. A measured ITL in
another statistic than the median gap becomes the median by the simulation's own ratio of the
two (like with like: the ITL target is then the measurement over the simulation of the same
statistic). Where a row's loop cannot be simulated (no finite answer) the closed form stays.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass, field, replace
from functools import partial
from typing import Any

import numpy as np
import pandas as pd

from wattgpu.config import CLOSED_FORM, target_prior
from wattgpu.modeling.physical.columns import values
from wattgpu.modeling.physical.features import columns_of, itl_statistic
from wattgpu.modeling.physical.operations import Rows, length
from wattgpu.modeling.physical.physics import DEFAULT_CONSTANTS, PhysicalConstants
from wattgpu.modeling.physical.prior import fit_constants, refit_prior, refit_prior_for
from wattgpu.modeling.serving.host import (
    HOST_COLUMNS,
    fit_host_time,
    host_columns,
    without_host,
)
from wattgpu.modeling.serving.loop import STATISTICS
from wattgpu.modeling.serving.run import PROMPT_SCALE, TTFT_OVERHEAD, simulate_rows
from wattgpu.modeling.serving.ttft_terms import KNOTS, simulate_efficiencies, simulated_ttft
from wattgpu.modeling.serving.ttft_terms import fit_terms as fit_ttft_groups
from wattgpu.modeling.serving.workload import engine_line_names, setup

# The simulated column of each ITL statistic a source measured (``features.ITL_STATISTICS``).
ITL_OF_STATISTIC = {
    "median": "itl_p50_s",
    "mean": "tpot_mean_s",
    "with_prefill": "latency_per_token_s",
}
# Rows an engine line needs for scales of its own.
MIN_LINE_ROWS = 20
# The most TTFT rows of an engine line its terms are fitted on (each simulated at every knot):
# two terms per line, which a few hundred rows fix as well as a thousand.
TERM_ROWS = 150
IDLE_SHARES = np.linspace(0.02, 0.6, 59)
BUSY_WEIGHTS = np.linspace(0.2, 2.0, 91)


@dataclass(frozen=True)
class SimulatedTerms:
    """What a fold's training rows fit on top of the simulation.

    Attributes:
        itl_scale: engine line -> scale on its simulated ITL (``""``: every line's).
        idle_share: a GPU's idle power over its TDP.
        busy_weight: the load a fully busy window puts on the GPU, over its TDP's dynamic part.
        host: engine line -> its host time fitted inside the simulation (``host.fit_host_time``:
            a scale on the table's fixed part, and s per sequence); a line not in it keeps the
            table's.
        ttft: engine line -> its TTFT terms ``(prefill efficiency, overhead s)`` (``""``: every
            line's; none at all: 1 and 0 s).

    """

    itl_scale: dict[str, float]
    idle_share: float
    busy_weight: float
    host: dict[str, tuple[float, float]] = field(default_factory=dict)
    ttft: dict[str, tuple[float, float]] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON values (a served model's card carries them)."""
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> SimulatedTerms:
        """Terms from ``to_dict``'s values."""
        return cls(
            itl_scale={str(k): float(v) for k, v in data["itl_scale"].items()},
            idle_share=float(data["idle_share"]),
            busy_weight=float(data["busy_weight"]),
            host={str(k): (float(v[0]), float(v[1])) for k, v in data.get("host", {}).items()},
            ttft={str(k): (float(v[0]), float(v[1])) for k, v in data.get("ttft", {}).items()},
        )


def ttft_terms_of(
    ttft: dict[str, tuple[float, float]], lines: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Rows on ``lines``: each one's prefill efficiency and overhead (s) from ``ttft``'s terms."""
    pooled = ttft.get("", (1.0, 0.0))
    chosen = [ttft.get(str(line), pooled) for line in lines]
    terms = np.array(chosen, dtype=float).reshape(len(chosen), 2)
    return terms[:, 0], terms[:, 1]


def simulated_itl(rows: Rows, sim: pd.DataFrame) -> np.ndarray:
    """Each row's simulated ITL in the statistic its ``itl_kind`` names (blank: the median)."""
    n = length(rows)
    stated = "itl_kind" in rows
    kinds = itl_statistic(np.asarray(rows["itl_kind"], dtype=object)) if stated else ["median"] * n
    kinds = np.asarray(kinds, dtype=object)
    out = np.full(n, np.nan)
    for statistic, column in ITL_OF_STATISTIC.items():
        mine = kinds == statistic
        out[mine] = sim[column].to_numpy(float)[mine]
    return out


def _scales(lines: np.ndarray, measured: np.ndarray, simulated: np.ndarray) -> dict[str, float]:
    ok = np.isfinite(measured) & np.isfinite(simulated) & (measured > 0) & (simulated > 0)
    if not ok.any():
        return {"": 1.0}
    ratio = measured[ok] / simulated[ok]
    scales = {"": float(np.median(ratio))}
    for line in np.unique(lines[ok]):
        mine = lines[ok] == line
        if mine.sum() >= MIN_LINE_ROWS:
            scales[str(line)] = float(np.median(ratio[mine]))
    return scales


def _scaled(scales: dict[str, float], lines: np.ndarray, simulated: np.ndarray) -> np.ndarray:
    return simulated * np.array([scales.get(str(line), scales[""]) for line in lines])


def power_prior(rows: Rows, sim: pd.DataFrame, idle_share: float, busy_weight: float) -> np.ndarray:
    """Power per GPU from the simulated busy share, W (never above TDP)."""
    tdp = np.asarray(rows["gpu_tdp_w"], dtype=float)
    busy = sim["busy_share"].to_numpy(float)
    return tdp * (idle_share + (1.0 - idle_share) * np.minimum(busy_weight * busy, 1.0))


def open_loop_server(rows: Rows) -> np.ndarray:
    """Rows of a server under a request rate (not a closed loop of users): closed-form power."""
    columns = columns_of(rows)
    n = length(columns)
    server = np.asarray(columns["scenario"]) == "server" if "scenario" in columns else np.zeros(n)
    return server.astype(bool) & ~np.isfinite(values(columns, "users", np.nan, positive=True))


def fit_terms(train: pd.DataFrame, sim: pd.DataFrame) -> SimulatedTerms:
    """The terms of ``SimulatedTerms`` on training rows and their simulation (same index)."""
    lines = engine_line_names(train)
    itl = _scales(lines, train["itl_s"].to_numpy(float), simulated_itl(train, sim))
    idle, weight = 0.1, 1.0
    power = train["mean_power_w"].to_numpy(float)
    measured = np.isfinite(power) & (power > 0) & ~open_loop_server(train)
    if measured.any():
        tdp = train["gpu_tdp_w"].to_numpy(float)[measured]
        busy = sim["busy_share"].to_numpy(float)[measured]
        load = np.minimum(BUSY_WEIGHTS[None, :, None] * busy[:, None, None], 1.0)
        guess = tdp[:, None, None] * (
            IDLE_SHARES[None, None, :] + (1.0 - IDLE_SHARES[None, None, :]) * load
        )
        error = np.median(np.abs(np.log(guess / power[measured][:, None, None])), axis=0)
        i, j = np.unravel_index(int(np.argmin(error)), error.shape)
        weight, idle = float(BUSY_WEIGHTS[i]), float(IDLE_SHARES[j])
    return SimulatedTerms(itl, idle, weight)


def fit_line_ttft_terms(
    rows: pd.DataFrame, constants: PhysicalConstants = DEFAULT_CONSTANTS
) -> dict[str, tuple[float, float]]:
    """``SimulatedTerms.ttft`` of training ``rows`` (with their host time): per engine line.

    At most ``TERM_ROWS`` of a line's measured TTFT rows, evenly spread over them, each
    simulated at every ``ttft_terms.KNOTS`` efficiency; the pooled terms (``""``, a line with
    too few rows) are the prior's prefill, efficiency 1, with the median line's overhead (the
    overhead fitted at 1 over every row where no line has terms); no TTFT row: none.
    """
    measured = rows["ttft_s"].to_numpy(float) if "ttft_s" in rows else np.full(len(rows), np.nan)
    lines = np.asarray(engine_line_names(rows), dtype=object)
    usable = np.isfinite(measured) & (measured > 0)
    chosen = np.concatenate(
        [_spread(np.flatnonzero(usable & (lines == line)), TERM_ROWS) for line in np.unique(lines)]
        or [np.array([], dtype=int)]
    )
    chosen = np.sort(chosen).astype(int)
    if not len(chosen):
        return {}
    simulated = simulate_efficiencies(rows.iloc[chosen], constants, KNOTS)
    fitted = fit_ttft_groups(lines[chosen], measured[chosen], simulated, pooled_efficiency=1.0)
    out = {line: (terms.efficiency, terms.overhead_s) for line, terms in fitted.items()}
    # A line with too few rows of its own (one nobody measured) runs the prior's own prefill
    # (g = 1) and pays the median line's overhead: a pooled efficiency mixes the lines' kernel
    # paths (0.125 fitted over AIConfigurator's three), and an overhead fitted at g = 1 over
    # every line is pulled to 0 by the lines whose g is below 1. Each source held out, TTFT
    # MdAPE against the pooled fit of both: AIConfigurator's rows 58.3 -> 52.9 %, LLM-Pilot's
    # 46.1 -> 44.0 % (bench/accuracy.py; the closed form 54.5 and 67.1 %).
    overheads = [overhead for line, (_, overhead) in out.items() if line]
    if overheads:
        out[""] = (1.0, float(np.median(overheads)))
    return out


def _spread(positions: np.ndarray, most: int) -> np.ndarray:
    """At most ``most`` of ``positions``, evenly spread over them (all of them if fewer)."""
    if len(positions) <= most:
        return positions
    return positions[np.linspace(0, len(positions) - 1, most).round().astype(int)]


def with_simulated_prior(rows: Rows, sim: pd.DataFrame, terms: SimulatedTerms) -> Rows:
    """``rows`` (with the closed-form prior's columns) with the simulated prior in their place.

    Replaced where the simulation answers: ``prior_itl_s`` (the median gap, the served
    statistic), ``prior_ttft_s``, ``prior_power_w`` and the power the target is relative to
    (``prior_power_cpu_w``: the simulation already holds the host's time, so both are one), their
    log features (an open-loop server's power stays the closed form's), and ``itl_median_s``
    (the measured ITL as the median gap, by the simulation's own median over the statistic the
    row measured). A frame or columns, as given.
    """
    out = columns_of(rows)  # a new mapping: ``rows`` stays as it was
    lines = engine_line_names(rows)
    simulated_median = sim["itl_p50_s"].to_numpy(float)
    median = _scaled(terms.itl_scale, lines, simulated_median)
    ttft = simulated_ttft(rows, sim) + ttft_terms_of(terms.ttft, lines)[1]
    power = power_prior(rows, sim, terms.idle_share, terms.busy_weight)
    if "itl_s" in out:
        with np.errstate(divide="ignore", invalid="ignore"):
            ratio = simulated_median / simulated_itl(rows, sim)
        out["itl_median_s"] = _kept(np.asarray(out["itl_s"], float) * ratio, out["itl_median_s"])
    out["prior_itl_s"] = _kept(median, out["prior_itl_s"])
    out["prior_ttft_s"] = _kept(ttft, out["prior_ttft_s"])
    # an open-loop server keeps every power column of the closed form's (see the module)
    closed_form = open_loop_server(out)
    power = _kept(power, out["prior_power_w"])
    with np.errstate(divide="ignore", invalid="ignore"):
        power_tdp = np.log(power / np.asarray(out["gpu_tdp_w"], float))
        itl = np.log(out["prior_itl_s"])
    simulated_power = {
        "prior_power_w": power,
        "prior_power_cpu_w": power,
        "log_prior_power_tdp": power_tdp,
        "log_prior_power_cpu_tdp": power_tdp,
    }
    for column, simulated in simulated_power.items():
        if closed_form.any():
            simulated = np.where(closed_form, np.asarray(out[column], float), simulated)
        out[column] = simulated
    out["log_prior_itl_s"] = out["log_prior_itl_cpu_s"] = itl
    if isinstance(rows, pd.DataFrame):
        return pd.DataFrame(out, index=rows.index)
    return out


def _kept(simulated: np.ndarray, closed_form: np.ndarray) -> np.ndarray:
    """The simulated value where it is positive and finite, else the closed form's."""
    good = np.isfinite(simulated) & (simulated > 0)
    return np.where(good, simulated, np.asarray(closed_form, dtype=float))


def on_simulated_prior(
    rows: Rows,
    terms: SimulatedTerms,
    runs: np.ndarray | None = None,
    constants: PhysicalConstants = DEFAULT_CONSTANTS,
) -> Rows:
    """``rows`` on the simulated prior of ``terms``, each with its line's host time and TTFT terms.

    The rows come back with the set-up their loops ran (``host.HOST_COLUMNS``,
    ``run.PROMPT_SCALE``, ``run.TTFT_OVERHEAD``), which an answer's simulated tails run too.

    A served model's queries, and a fold's test side. ``runs``: the rows that can run
    (``answering.domain.cannot_run`` tells the others); the others are not simulated and keep
    the closed form. ``constants``: the step's, as ``terms`` were fitted with.

    Raises:
        QueryError: a row's client or engine knob cannot be run (``serving.checks``).

    """
    columns = columns_of(rows)
    n = length(columns)
    runs = np.flatnonzero(np.ones(n, dtype=bool) if runs is None else runs)
    sim = pd.DataFrame(np.nan, index=range(n), columns=list(STATISTICS))
    set_up = {name: np.full(n, np.nan) for name in (*HOST_COLUMNS, PROMPT_SCALE, TTFT_OVERHEAD)}
    if len(runs):
        some = {name: values[runs] for name, values in columns.items()}
        lines = engine_line_names(some)
        ran = host_columns(lines, terms.host, _table_fixed(some))
        ran[PROMPT_SCALE], ran[TTFT_OVERHEAD] = ttft_terms_of(terms.ttft, lines)
        for name, column in ran.items():
            set_up[name][runs] = column
        some |= ran
        sim.iloc[runs] = simulate_rows(some, constants).to_numpy(float)
    out = with_simulated_prior(rows, sim, terms)
    # the set-up the prior ran, which an answer's simulated tails run too
    if isinstance(out, pd.DataFrame):
        return out.assign(**set_up)
    return out | set_up


def fit_simulated_prior(
    rows: pd.DataFrame, constants: PhysicalConstants = DEFAULT_CONSTANTS
) -> tuple[pd.DataFrame, SimulatedTerms]:
    """``rows`` with the simulated prior fitted on themselves, and its terms (a served model's).

    One simulation without host time, whose shortfall against the measured ITL fits each
    engine line's host time (``host.fit_host_time``); with it, the TTFT terms
    (``fit_line_ttft_terms``); then one simulation with both, on which the ITL scales and power's
    terms are fitted (``fit_terms``).
    """
    lines = engine_line_names(rows)
    table_fixed = _table_fixed(rows)
    bare = simulate_rows(rows.assign(**without_host(len(rows))), constants)
    measured = rows["itl_s"].to_numpy(float) if "itl_s" in rows else np.full(len(rows), np.nan)
    batch = bare["decode_batch"].to_numpy(float)
    host = fit_host_time(lines, measured, simulated_itl(rows, bare), table_fixed, batch)
    hosted = rows.assign(**host_columns(lines, host, table_fixed))
    ttft = fit_line_ttft_terms(hosted, constants)
    efficiency = ttft_terms_of(ttft, lines)[0]
    hosted = hosted.assign(**{PROMPT_SCALE: efficiency})
    sim = simulate_rows(hosted, constants)
    terms = replace(fit_terms(hosted, sim), host=host, ttft=ttft)
    return with_simulated_prior(hosted, sim, terms), terms


def _table_fixed(rows: Rows) -> np.ndarray:
    """Each row's fixed host time per step as ``data/engine_lines.csv`` guesses it, s."""
    columns = {k: v for k, v in columns_of(rows).items() if k not in HOST_COLUMNS}
    return setup(columns).host.fixed


def refit_for(
    target: str, prior: str | None = None
) -> Callable[[pd.DataFrame, pd.DataFrame], tuple[pd.DataFrame, pd.DataFrame]]:
    """``target``'s folds' refit on ``prior`` (a fold's ``prepare``; it pickles to the workers).

    ``closed-form``: ``physical.prior.refit_prior``; ``simulated``: ``refit_simulated_prior``.
    """
    if target_prior(target, prior) == CLOSED_FORM:
        return refit_prior_for(target)
    return partial(refit_simulated_prior, target=target)


def refit_simulated_prior(
    train: pd.DataFrame, test: pd.DataFrame, target: str | None = None
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Both sides of a fold with the simulated prior fitted on ``train`` (as ``refit_prior``).

    The closed form's columns first (``physical.prior.refit_prior``), then both sides simulated
    at the constants fitted on ``train`` and the terms fitted on its simulation, the test side
    with the host time fitted on ``train`` (never any it carries).
    """
    train, test = refit_prior(train, test, target)
    constants = fit_constants(train)
    fitted, terms = fit_simulated_prior(train, constants)
    return fitted, on_simulated_prior(test, terms, constants=constants)
