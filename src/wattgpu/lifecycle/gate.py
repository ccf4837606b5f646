"""The quality gate: which figure a version carries, and whether a candidate beats production.

Each version carries the leave-one-GPU-out MdAPE of its tuning run's evaluation (its out-of-fold
LOGO predictions over every training row, not the best trial of the search) and the hash of the
data it was measured on. A candidate is compared with production only on the same rows: the
same data, or the rows both evaluations predicted held out; a version worse than production by
more than ``TOLERANCE_PP`` percentage points is refused unless forced, and so is one whose data
shares too few rows with production's. Pure decisions, plus the one read of two runs' held-out
predictions (``on_shared_rows``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from wattgpu.errors import ModelNotFound
from wattgpu.lifecycle import tracking
from wattgpu.modeling.metrics import mdape

if TYPE_CHECKING:
    import pandas as pd

GATE_TAG = "wattgpu.logo_mdape"
GATE_DATA_TAG = "wattgpu.logo_mdape_data"
GATE_ROWS_TAG = "wattgpu.logo_mdape_rows"
LOGO_OOF_CSV = "evaluation/oof_LOGO.csv"
# How far the gate's figure moves when one recipe is retrained on one data set (the shipped
# data) with another seed, measured by bench/gate_spread.py on 2026-12-02 (2 CPUs, AMD EPYC),
# the main job's full recipe and 10 trials:
#   python bench/gate_spread.py --target power --seeds 6 --trials 10
#     6 retrains, 15.814-16.668 %: spread 0.854 pp, sd 0.317 pp
#   python bench/gate_spread.py --target itl --seeds 4 --trials 10
#     4 retrains, 13.548-14.031 %: spread 0.483 pp, sd 0.226 pp
MEASURED_SPREAD_PP = {"power": 0.854, "itl": 0.483}
# A candidate is "worse" than production when its LOGO MdAPE exceeds production's by more than
# this many percentage points (on the same rows): above the largest measured spread with a
# margin for spreads measured on few retrains. Two retrains of power differ with an sd of about
# 0.32 x sqrt(2) = 0.45 pp, so a retrain of the same recipe and data is refused for noise about
# once in two thousand (z = 3.3).
TOLERANCE_PP = 1.5


def logo_mdape(oof: pd.DataFrame) -> float:
    """The held-out figure: MdAPE (%) over every row of a run's out-of-fold LOGO predictions.

    The one definition: the model card's ``logo_mdape`` and the version's ``GATE_TAG`` are both
    this, computed from the same frame (``LOGO_OOF_CSV``), so they name one number.
    """
    return mdape(oof["true"], oof["pred"])


@dataclass(frozen=True)
class Figure:
    """A version's gate figure: LOGO MdAPE (%) and the data (hash, row count) it was measured on."""

    mdape: float
    data: str | None
    rows: str | None

    def describe(self) -> str:
        """``2.000 % on data 0123456789ab (240 rows)``."""
        text = f"{self.mdape:.3f} % on {data_name(self.data)}"
        return text + (f" ({self.rows} rows)" if self.rows else "")


def data_name(data: str | None) -> str:
    """A data hash cut to 12 characters for people (``unknown`` when none)."""
    if not data:
        return "data unknown"
    return data if " " in data else f"data {data[:12]}"


def figure(version: Any) -> Figure:
    """The version's gate figure from its tags; ``ModelNotFound`` naming what is missing."""
    value = version.tags.get(GATE_TAG)
    try:
        found = float(value)
    except (TypeError, ValueError):
        raise ModelNotFound(
            f"{version.name} v{version.version} lacks tag {GATE_TAG} (got {value!r}): it was not "
            f"registered by `wattgpu register`, so the quality gate cannot compare it"
        ) from None
    return Figure(found, version.tags.get(GATE_DATA_TAG) or None, version.tags.get(GATE_ROWS_TAG))


def production_figure(production: Any | None, stage: str, force: bool) -> Figure | None:
    """Production's gate figure (None: no production, or no figure and none needed).

    A production without the figure is needed only by an unforced promotion to production, which
    ``figure`` refuses with ``ModelNotFound``.
    """
    if production is None:
        return None
    if GATE_TAG in production.tags or (stage == "production" and not force):
        return figure(production)
    return None


# The fewest rows two versions' evaluations must share to be compared on them.
MIN_SHARED_ROWS = 20
ROW_KEY = ["gpu", "model", "scenario", "true"]


def on_shared_rows(
    candidate: Any, ours: Figure, production: Any, theirs: Figure
) -> tuple[Figure, Figure] | None:
    """Both versions' LOGO MdAPE on the rows both evaluations predicted held out, or None.

    Each tuning run logs its out-of-fold LOGO predictions (``LOGO_OOF_CSV``): every row there
    was predicted by a model that never saw its GPU. On the rows the two runs share (same GPU,
    LLM, scenario and measured value, each once in both), the two figures compare like with
    like. A version's saved model cannot be scored on its own training rows instead: it has
    seen them. None when a run's predictions are missing or they share fewer than
    ``MIN_SHARED_ROWS`` rows.
    """
    frames = []
    for entity in (candidate, production):
        run_id = entity.tags.get("wattgpu.run_id") or entity.run_id
        if not run_id:
            return None
        try:
            frame = tracking.load_frame(run_id, LOGO_OOF_CSV)
        except ModelNotFound:
            return None
        frames.append(frame.drop_duplicates(ROW_KEY, keep=False))
    shared = frames[0].merge(frames[1], on=ROW_KEY, suffixes=("_ours", "_theirs"))
    if len(shared) < MIN_SHARED_ROWS:
        return None
    data = f"rows shared by data {(ours.data or '?')[:12]} and {(theirs.data or '?')[:12]}"
    return (
        Figure(mdape(shared["true"], shared["pred_ours"]), data, str(len(shared))),
        Figure(mdape(shared["true"], shared["pred_theirs"]), data, str(len(shared))),
    )


def decide(
    version: int,
    stage: str,
    candidate: Figure,
    production: Any | None,
    theirs: Figure | None,
    force: bool,
    stamp: str,
) -> tuple[str, str, str]:
    """The decision (accepted / refused / forced), the record to tag, the refusal's line.

    Only a promotion to production can be refused; staging records the comparison. A
    production without the gate's tag (registered outside wattgpu) is compared with nothing
    when forced or for staging. Figures measured on different data are not compared:
    production refuses such a candidate unless forced.
    """
    gated = stage == "production"
    if production is not None and int(production.version) == version:
        return "accepted", f"accepted {stage} at {stamp}: already in production", ""
    comparable = theirs is not None and candidate.data is not None and theirs.data == candidate.data
    worse = comparable and candidate.mdape > theirs.mdape + TOLERANCE_PP
    unlike = theirs is not None and not comparable
    decision = "accepted"
    if gated and (worse or unlike):
        decision = "forced" if force else "refused"
    record = f"{decision} {stage} at {stamp}: candidate LOGO MdAPE {candidate.describe()}"
    if theirs is not None:
        record += f" vs production v{production.version} {theirs.describe()}"
        record += "; not comparable: different data" if unlike else f"; tolerance {TOLERANCE_PP} pp"
    elif production is not None:
        record += f" (production v{production.version} has no {GATE_TAG})"
    else:
        record += " (no production version to compare with)"
    if gated and production is not None and decision != "refused":
        record += f"; replaced v{production.version}"
    refusal = ""
    if decision == "refused" and unlike:
        refusal = (
            f"refused: {production.name} v{version} and production v{production.version} were "
            f"evaluated on different data ({data_name(candidate.data)} vs "
            f"{data_name(theirs.data)}) sharing fewer than {MIN_SHARED_ROWS} rows, so their "
            f"LOGO MdAPEs ({candidate.mdape:.2f} %, {theirs.mdape:.2f} %) cannot be compared; "
            f"retrain one on the other's data, or use --force to promote anyway"
        )
    elif decision == "refused":
        on = "the same data" if " " not in (candidate.data or "") else f"the {candidate.data}"
        rows = f"{candidate.rows} rows, " if candidate.rows else ""
        refusal = (
            f"refused: {production.name} v{version} has LOGO MdAPE {candidate.mdape:.2f} %, worse "
            f"than production v{production.version}'s {theirs.mdape:.2f} % on {on} "
            f"({rows}tolerance {TOLERANCE_PP} pp); use --force to promote anyway"
        )
    return decision, record, refusal
