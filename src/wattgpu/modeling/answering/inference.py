"""Answering prediction queries: check -> features -> model -> interval and warnings.

The one code path behind the served pyfunc, ``wattgpu predict`` and ``wattgpu recommend``; it
calls the same feature function as training (on columns, never framed: see features).
"""

from __future__ import annotations

import itertools
from typing import Any

import numpy as np
import pandas as pd

from wattgpu.arrays import blanks, pair_codes
from wattgpu.data.catalog import Catalog
from wattgpu.modeling.answering.card import ModelCard
from wattgpu.modeling.answering.domain import cannot_run, domain_warnings
from wattgpu.modeling.answering.queries import SETUP_FIELDS, check_query_columns
from wattgpu.modeling.answering.tail_ratios import TailRatios
from wattgpu.modeling.answering.tails import (
    PERCENTILES,
    TAIL_COLUMNS,
    TAILED,
    simulated_tails,
    untailed,
)
from wattgpu.modeling.learning import models
from wattgpu.modeling.learning.analogs import attach, find_in
from wattgpu.modeling.learning.uncertainty import (
    IntervalModel,
    Intervals,
    intervals,
    not_validated_note,
)
from wattgpu.modeling.physical.features import build_features
from wattgpu.modeling.physical.targets import REPORT_SCALE, UNIT
from wattgpu.modeling.serving.checks import check_setup
from wattgpu.modeling.serving.jitter import Jitter
from wattgpu.modeling.serving.workload import LENGTH_SPREAD, assumed_spread, client_names

# The load of each query, echoed in the answer so that rows are told apart (after defaults:
# what the prediction assumed; batch_size stays blank where the engine chooses).
LOAD_COLUMNS = (
    "request_rate_rps",
    "concurrency",
    "batch_size",
    "input_tokens",
    "output_tokens",
    "num_gpus",
)
# The serving set-up each answer assumed: its client (as stated, else the one its load implies:
# ``data.clients.CLIENT_FOR_LOAD``), the spread of its lengths (as stated, else its client's:
# ``serving.workload.assumed_spread``) and the engine knobs it stated (blank: the engine's own).
SETUP_COLUMNS = SETUP_FIELDS
CLIENT_COLUMNS = ("client", LENGTH_SPREAD)
KNOB_COLUMNS = tuple(c for c in SETUP_COLUMNS if c not in CLIENT_COLUMNS)
OUTPUT_COLUMNS = (
    "gpu",
    "model",
    "scenario",
    *LOAD_COLUMNS,
    *SETUP_COLUMNS,
    "target",
    "prediction",
    "lower",
    "upper",
    "unit",
    "novelty",
    "analogs",
    "warnings",
)
FLOAT_OUTPUTS = (
    *LOAD_COLUMNS,
    LENGTH_SPREAD,
    *KNOB_COLUMNS,
    "prediction",
    "lower",
    "upper",
    *PERCENTILES,
)


def output_columns(target: str) -> tuple[str, ...]:
    """The answer's columns for ``target``: ``OUTPUT_COLUMNS``, and for ITL and TTFT their tails.

    The tails (``p90``, ``p99`` and ``tails``, where they come from) follow the interval.
    """
    if target not in TAILED:
        return OUTPUT_COLUMNS
    after = OUTPUT_COLUMNS.index("upper") + 1
    return (*OUTPUT_COLUMNS[:after], *TAIL_COLUMNS, *OUTPUT_COLUMNS[after:])


def predict_queries(
    card: ModelCard,
    model: models.Regressor,
    bounds: IntervalModel,
    catalog: Catalog,
    queries: pd.DataFrame,
    with_tails: bool = True,
) -> pd.DataFrame:
    """Predict the card's target (power or ITL) for raw query rows.

    Args:
        card: the model card (its ``target``, and its training ``domain`` for the warnings).
        model: the fitted CatBoost regressor.
        bounds: the interval model (the row's difficulty and the conformal factors).
        catalog: the catalogue snapshot the model was trained with.
        queries: rows with ``gpu``, ``model``, ``scenario`` and optional workload/spec columns.
        with_tails: False leaves a latency's p90 and p99 blank (``answer_columns``).

    Returns:
        One row per query (``output_columns(target)``): canonical names, the load, the
        prediction with its interval (W or ms), for ITL and TTFT their p90 and p99 and where
        they come from (``answering.tails``), the unit and a ``; ``-joined warning string. A
        configuration that cannot run (weights and one sequence's KV cache do not fit) gets NaN
        as prediction, interval and tails, and the reason in ``warnings``.

    Raises:
        QueryError: a row is invalid (names the row and the field), or its serving loop cannot
            be simulated (``serving.checks``).

    """
    return pd.DataFrame(answer_columns(card, model, bounds, catalog, queries, with_tails))


def answer_columns(
    card: ModelCard,
    model: models.Regressor,
    bounds: IntervalModel,
    catalog: Catalog,
    queries: pd.DataFrame,
    with_tails: bool = True,
) -> dict[str, Any]:
    """``predict_queries``' answer as columns (``output_columns``, in order), not yet framed.

    ``with_tails=False`` leaves a latency's p90 and p99 blank and simulates no serving loop (a
    loop is most of a query's time): for a caller that reads the median only.
    """
    target = card.target
    rows = build_features(check_query_columns(queries, catalog), catalog)
    check_setup(rows)  # a client or engine knob the serving loop cannot run: every target refuses
    if card.simulated_prior:  # a model of the simulated prior answers on it
        # imported here: a model of the closed-form prior never reads it
        from wattgpu.modeling.serving.prior import SimulatedTerms, on_simulated_prior

        terms = SimulatedTerms.from_dict(card.simulated_prior)
        rows = on_simulated_prior(rows, terms, ~cannot_run(rows))
    found = find_in(model.evidence, rows)  # None: a model logged before the analogs
    rows = attach(rows, found)
    pools = models.Pools(target, rows)  # the members and the interval share their inputs
    value = np.asarray(models.predict_si(target, model, rows, pools), dtype=float)
    bounded = intervals(bounds, rows, value, pools)
    scale = REPORT_SCALE[target]
    unrunnable = cannot_run(rows)
    answer: dict[str, Any] = {c: rows[c] for c in ("gpu", "model", "scenario", *LOAD_COLUMNS)}
    answer["concurrency"] = rows["users"]  # as stated (the features' own is the decoding count)
    answer["client"] = client_names(rows)
    answer[LENGTH_SPREAD] = assumed_spread(rows)
    answer |= {c: rows[c] for c in KNOB_COLUMNS}
    answer["target"] = np.full(len(value), target, dtype=object)
    for column, values in (
        ("prediction", value),
        ("lower", bounded.lower),
        ("upper", bounded.upper),
    ):
        answer[column] = np.where(unrunnable, np.nan, values * scale)
    if target in TAILED and with_tails:  # one simulation of the batch's serving loops
        jitter = Jitter.from_dict(card.jitter)
        ratios = TailRatios.from_dict(card.tail_ratios)
        answer |= simulated_tails(target, rows, answer["prediction"], jitter, ratios)
    elif target in TAILED:
        answer |= untailed(len(value))
    answer["unit"] = np.full(len(value), UNIT[target], dtype=object)
    answer["novelty"] = bounded.novelty
    # the measured rows the answer leans on, in words ('' where none)
    answer["analogs"] = found.support()
    answer["warnings"] = joined(
        joined(
            np.asarray(domain_warnings(rows, card.domain), dtype=object),
            interval_notes(target, np.asarray(rows["scenario"]), bounded),
        ),
        setup_notes(target, rows, simulated_prior=bool(card.simulated_prior)),
    )
    return {column: answer[column] for column in output_columns(target)}


def interval_notes(target: str, scenarios: np.ndarray, bounded: Intervals) -> np.ndarray:
    """Per row, the note that its interval was never checked on its kind of novelty ('' if it was).

    "server power intervals not validated on an unseen GPU": the factors that bound the row are
    its kind's pooled ones, the scenario's own residuals being from fewer than two GPUs.
    """
    out = np.full(len(scenarios), "", dtype=object)
    unchecked = np.flatnonzero(~bounded.validated)
    if len(unchecked):  # one note per distinct (scenario, kind), spread back by its code
        codes, pairs = pair_codes(scenarios[unchecked], bounded.kind[unchecked])
        notes = np.empty(len(pairs), dtype=object)
        notes[:] = [not_validated_note(target, scenario, kind) for scenario, kind in pairs]
        out[unchecked] = notes[codes]
    return out


def setup_notes(target: str, rows: Any, simulated_prior: bool = False) -> np.ndarray:
    """Per row, what the client and engine knobs it states act on ('' where it states none).

    The trees do not take them: on the closed-form prior they act on a latency's p90 and p99
    only, through the simulated serving loop (``answering.tails``), and on no median and no
    power. The answer says so rather than seem to take them everywhere. A model on the
    ``simulated_prior`` takes them in every answer, through its prior: no note.
    """
    knobs = np.zeros(len(rows["client"]), dtype=bool)
    for column in KNOB_COLUMNS:
        knobs |= np.isfinite(np.asarray(rows[column], dtype=float))
    flags = {  # what each row states, by the name the note gives it
        "client": ~blanks(np.asarray(rows["client"], dtype=object)),  # checked text, or None
        "length spread": np.isfinite(np.asarray(rows[LENGTH_SPREAD], dtype=float)),
        "engine knobs": knobs,
    }
    out = np.full(len(knobs), "", dtype=object)
    if simulated_prior:
        return out
    for combination in itertools.product((True, False), repeat=len(flags)):
        names = [name for name, on in zip(flags, combination, strict=True) if on]
        if not names:
            continue
        stated = np.logical_and.reduce(
            [flag == on for flag, on in zip(flags.values(), combination, strict=True)]
        )
        named = "the stated " + " and ".join(
            [", ".join(names[:-1]), names[-1]] if len(names) > 1 else names
        )
        many = names[-1] == "engine knobs" or len(names) > 1
        verb, them = ("act", "them") if many else ("acts", "it")
        if target in TAILED:
            note = (
                f"{named} {verb} on the p90 and p99 only (the simulated serving loop's): the "
                f"median comes from a model trained without {them}"
            )
        else:
            note = f"{named} {verb} on no {target} answer: its model is trained without {them}"
        out[stated] = note
    return out


def joined(first: np.ndarray, second: np.ndarray) -> np.ndarray:
    """Two columns of "; "-joined warnings, joined row by row (blank stays blank)."""
    both = (first != "") & (second != "")
    out = np.where(first == "", second, first)
    out[both] = first[both] + "; " + second[both]
    return out
