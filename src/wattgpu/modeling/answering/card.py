"""The model card: what a served model is, how well it did, and what it needs to answer.

The tuning job fills in the training part (target, parameters, data version, accuracy, domain);
the packaging adds what the served model needs to rebuild itself (its members, the interval and
the query fields). It travels as ``metadata.json`` beside the model, with the keys it has always
had, so that a model logged before the card existed still loads.
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass, field, fields
from typing import Any

from wattgpu.modeling.learning.uncertainty import COVERAGE, Calibration, IntervalModel
from wattgpu.modeling.learning.unseen import UNSEEN_GPU, Seen


@dataclass(frozen=True)
class IntervalSpec:
    """The interval model's numbers (its difficulty model, when there is one, is a file).

    Attributes:
        without: feature columns the difficulty model leaves out.
        coverage: the nominal coverage.
        calibrations: per kind of novelty (``unseen.KINDS``), its conformal factors
            (``uncertainty.Calibration.to_dict``).
        seen: the training rows' GPUs, LLM architectures and set-ups (``unseen.Seen``); a card
            written before the kinds has none, and every row is an unseen GPU.
        difficulty: a constant difficulty when every residual was alike; ``None`` when the
            difficulty is a CatBoost model stored beside the card.

    """

    without: tuple[str, ...]
    coverage: float
    calibrations: dict[str, dict[str, Any]]
    seen: dict[str, Any] | None = None
    difficulty: float | None = None

    @classmethod
    def of(cls, bounds: IntervalModel) -> IntervalSpec:
        """The numbers of a fitted interval model."""
        constant = bounds.difficulty if isinstance(bounds.difficulty, float) else None
        return cls(
            tuple(bounds.without),
            bounds.coverage,
            {kind: c.to_dict() for kind, c in bounds.calibrations.items()},
            bounds.seen.to_dict() if bounds.seen is not None else None,
            constant,
        )

    @classmethod
    def from_dict(cls, spec: dict[str, Any]) -> IntervalSpec:
        """Read the card's ``interval`` entry.

        A card written before the kinds holds one set of factors (``q_low``, ``q_high``,
        ``by_scenario``), calibrated on held-out GPUs: an unseen GPU's.
        """
        calibrations = spec.get("calibrations")
        if calibrations is None:
            calibrations = {
                UNSEEN_GPU: {
                    "q_low": spec["q_low"],
                    "q_high": spec["q_high"],
                    "by_scenario": spec.get("by_scenario", {}),
                }
            }
        return cls(
            tuple(spec["without"]),
            float(spec["coverage"]),
            calibrations,
            spec.get("seen"),
            spec.get("difficulty"),
        )

    def model(self, target: str, difficulty: Any) -> IntervalModel:
        """The interval model of these numbers around a difficulty (a model or a number)."""
        return IntervalModel(
            target,
            self.without,
            difficulty,
            {kind: Calibration.from_dict(c) for kind, c in self.calibrations.items()},
            Seen.from_dict(self.seen) if self.seen is not None else None,
            self.coverage,
        )


# What each target's served number is, in words (the card carries it; a query gets this).
SERVED_STATISTIC = {
    "power": "mean board power over the serving window, W per GPU",
    "itl": "median gap between two consecutive tokens of one request, ms",
    "ttft": "median time from a request's arrival to its first token, ms",
}


@dataclass(frozen=True)
class ModelCard:
    """A served model's metadata (stored as ``metadata.json``).

    Attributes:
        target: ``power`` or ``itl``.
        domain: what the model was trained on (``training_domain``), for the warnings.
        params: the CatBoost parameters of the best trial.
        data_hash: SHA-256 of the measurement files (the data version).
        logo_mdape: leave-one-GPU-out MdAPE over every out-of-fold LOGO prediction of the
            evaluation: the figure the registry's quality gate compares.
        logo_mdape_by_scenario: the evaluation's LOGO MdAPE per scenario.
        interval_coverage_nominal: the coverage the interval aims at.
        interval_coverage_held_out_gpu: the interval's coverage on GPUs held out of its fit.
        interval_width_held_out_gpu: its median relative width there.
        interval_held_out: per split (CV, LOGO, LOLO, LOSO), per scenario and ``all``, the
            coverage and width of intervals bounded as served on that split's held-out rows
            (``interval_check.check_intervals``).
        interval_not_validated: the kinds and scenarios whose served intervals were never
            checked (their residuals are from fewer than two GPUs), as warnings.
        wattgpu_version: the package version that trained the model.
        members: per CatBoost member, the feature columns it leaves out (packaging).
        query_fields: the fields a query may hold (packaging).
        interval: the interval model's numbers (packaging).
        statistic: what the served number is (``SERVED_STATISTIC``: for ITL, the median gap
            between two tokens of one request).
        familiarity: the ranges and engines the members were trained on, which shrink a far
            query's correction (``modeling.learning.novelty``; packaging).
        simulated_prior: on a recipe of the simulated prior, its terms fitted on every training
            row (``modeling.serving.prior.SimulatedTerms``), which each query's prior takes;
            empty: the closed-form prior.
        jitter: the spread of a step's time (``modeling.serving.jitter.Jitter``), fitted on the
            training rows that ran one user and measured their gaps' tails, which the simulated
            loop's gap percentiles take (``answering.tails``); empty: none fitted.
        tail_ratios: for TTFT, the training rows' measured p90 and p99 over the median by kind
            of client and number of users (``modeling.answering.tail_ratios.TailRatios``), which
            answer the tails where they were measured; empty: none fitted.

    """

    target: str
    domain: dict[str, Any]
    params: dict[str, Any] = field(default_factory=dict)
    data_hash: str = ""
    logo_mdape: float = math.nan
    logo_mdape_by_scenario: dict[str, float] = field(default_factory=dict)
    interval_coverage_nominal: float = COVERAGE
    interval_coverage_held_out_gpu: float = math.nan
    interval_width_held_out_gpu: float = math.nan
    interval_held_out: dict[str, dict[str, dict[str, float]]] = field(default_factory=dict)
    interval_not_validated: tuple[str, ...] = ()
    wattgpu_version: str = ""
    members: tuple[tuple[str, ...], ...] = ()
    query_fields: tuple[str, ...] = ()
    interval: IntervalSpec | None = None
    statistic: str = ""
    familiarity: dict[str, Any] = field(default_factory=dict)
    simulated_prior: dict[str, Any] = field(default_factory=dict)
    jitter: dict[str, Any] = field(default_factory=dict)
    tail_ratios: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not self.statistic:
            object.__setattr__(self, "statistic", SERVED_STATISTIC.get(self.target, ""))

    def to_dict(self) -> dict[str, Any]:
        """The card as plain JSON values; packaging fields only once they are filled in."""
        out = asdict(self)
        packaging = ("members", "query_fields", "interval", "familiarity", "simulated_prior")
        for name in (*packaging, "jitter", "tail_ratios"):
            if not out[name]:
                del out[name]
        return out

    def to_json(self) -> str:
        """The card as ``metadata.json`` text."""
        return json.dumps(self.to_dict(), indent=2, default=float)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ModelCard:
        """Read a card; keys this version does not know (an older or newer card's) are skipped."""
        known = {f.name for f in fields(cls)}
        values = {k: v for k, v in data.items() if k in known}
        values["members"] = tuple(tuple(m) for m in values.get("members", ()))
        values["query_fields"] = tuple(values.get("query_fields", ()))
        values["interval_not_validated"] = tuple(values.get("interval_not_validated", ()))
        spec = values.get("interval")
        if spec is not None:
            values["interval"] = IntervalSpec.from_dict(spec)
        return cls(**values)

    @classmethod
    def from_json(cls, text: str) -> ModelCard:
        """Read ``metadata.json`` text."""
        return cls.from_dict(json.loads(text))
