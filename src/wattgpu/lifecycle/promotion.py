"""Promotion: move a version to ``staging`` or ``production`` behind the gate, under the lock.

Which version holds each stage is recorded in the promotion log (``promotion_log``), committed
with a compare-and-set under the promotion lock (``promotion_lock``); the aliases and, where the
installed MLflow still supports them, the classic stages (deprecated since MLflow 2.9) are
derived from it and put back in line with it by every promotion, each write fenced, so that a
late write of a holder that lost its lock does not stay. The gate (``gate``) decides; the
decision is recorded, after the commit, as a version tag with both figures and their data.
"""

from __future__ import annotations

import datetime as dt
import warnings
from dataclasses import dataclass
from typing import Any

from mlflow.exceptions import MlflowException
from mlflow.tracking import MlflowClient

from wattgpu.errors import ConfigError, ModelNotFound, WattgpuError
from wattgpu.lifecycle import promotion_lock, promotion_log
from wattgpu.lifecycle.gate import Figure, decide, figure, on_shared_rows, production_figure
from wattgpu.lifecycle.names import model_name
from wattgpu.lifecycle.promotion_lock import fenced

STAGES = ("staging", "production")
CHALLENGER = "challenger"
ARCHIVED_TAG = "wattgpu.archived"


class PromotionRefused(WattgpuError):
    """The quality gate refused a promotion."""


@dataclass(frozen=True)
class Promotion:
    """What a promotion did."""

    target: str
    version: int
    stage: str
    candidate_mdape: float
    production_mdape: float | None
    previous_production: int | None
    forced: bool

    def line(self) -> str:
        """One line saying what the promotion did, with the gate's numbers."""
        line = f"{model_name(self.target)} v{self.version} -> {self.stage} "
        line += f"(LOGO MdAPE {self.candidate_mdape:.2f} %"
        if self.production_mdape is not None:
            line += f"; production had {self.production_mdape:.2f} %"
        else:
            line += "; first version, no production to compare with"
        line += ", forced)" if self.forced else ")"
        if self.previous_production is not None:
            line += f"; v{self.previous_production} archived"
        return line


def registry_client() -> Any:
    """A registry client whose calls wait out a locked SQLite store (``promotion_lock.patient``)."""
    return promotion_lock.patient(MlflowClient())


# What the registry answers for a model, version or alias that does not exist. Any other error
# (an unreachable server, a broken store) propagates: it must not read as "no such version".
NOT_FOUND = ("RESOURCE_DOES_NOT_EXIST",)
NO_ALIAS = ("RESOURCE_DOES_NOT_EXIST", "INVALID_PARAMETER_VALUE")


def version_of(client: MlflowClient, name: str, version: int) -> Any:
    """Version ``version`` of model ``name``, or ``ModelNotFound`` saying how to list them."""
    try:
        return client.get_model_version(name, str(version))
    except MlflowException as exc:
        if exc.error_code not in NOT_FOUND:
            raise
        raise ModelNotFound(
            f"{name} has no version {version}; `wattgpu models` lists them"
        ) from None


def alias_version(client: MlflowClient, name: str, alias: str) -> Any | None:
    """The version holding ``alias`` of model ``name`` (``None``: no version holds it)."""
    try:
        return client.get_model_version_by_alias(name, alias)
    except MlflowException as exc:
        if exc.error_code not in NO_ALIAS:
            raise
        return None


def promote(target: str, version: int, stage: str, force: bool = False) -> Promotion:
    """Move alias ``stage`` to ``version``, behind the quality gate, under the promotion lock.

    Staging takes any version with the project's tags: the gate compares it with production and
    records the comparison. Production refuses a version worse than the current one, or one
    measured on other data, unless forced. The whole read-compare-write runs under
    ``promotion_lock``: the registry is first put in line with the promotion log
    (``promotion_log``), the decision is committed to the log (a compare-and-set), then the
    aliases and stages follow it and the decision is tagged, each write fenced.

    A promotion that loses its lock (it stalled past its lease) takes the lock again, puts the
    aliases and stages back in line with the log (undoing a write of its own that landed late),
    and tags on the version what happened: it committed (nobody committed after it) or timed out.

    Raises:
        ConfigError: unknown stage, or production asked to step down to staging.
        ModelNotFound: the version does not exist or lacks the project's tags.
        PromotionRefused: the candidate is worse than production, or not comparable with it
            (and not forced).
        LockBusy: another promotion kept the lock too long, or this one lost it.

    """
    if stage not in STAGES:
        raise ConfigError(f"stage must be one of {', '.join(STAGES)}; got {stage!r}")
    client = registry_client()
    name = model_name(target)
    candidate = figure(version_of(client, name, version))
    with promotion_lock.held(client, name) as lease:
        stamp = now()
        try:
            return promote_held(client, lease, target, version, stage, force, candidate, stamp)
        except promotion_lock.LockBusy as exc:
            lost = exc
    return repair(client, target, version, stage, lease.owner, stamp, lost)


def now() -> str:
    """The time stamp of a decision record: UTC, to the second."""
    return dt.datetime.now(dt.UTC).isoformat(timespec="seconds")


def promote_held(
    client: Any,
    lease: promotion_lock.Lease,
    target: str,
    version: int,
    stage: str,
    force: bool,
    candidate: Figure,
    stamp: str,
) -> Promotion:
    """The promotion with the lock held (see ``promote``).

    A late commit by a holder that lost the lock can take the number this one meant to commit;
    then the gate decides again on what that commit left.
    """
    for _ in range(3):
        done = _decide_and_commit(client, lease, target, version, stage, force, candidate, stamp)
        if done is not None:
            return done
    raise promotion_lock.LockBusy(
        "three late commits of promotions that lost the lock came between this promotion's "
        "decision and its commit; nothing was moved, try again"
    )


def _decide_and_commit(
    client: Any,
    lease: promotion_lock.Lease,
    target: str,
    version: int,
    stage: str,
    force: bool,
    candidate: Figure,
    stamp: str,
) -> Promotion | None:
    """Reconcile, read production, decide, commit, derive, record; ``None`` on a lost commit."""
    name = model_name(target)
    before = _reconcile(client, lease, name, {})
    production = alias_version(client, name, "production")
    if production is not None and int(production.version) == version and stage == "staging":
        raise ConfigError(
            f"{name} v{version} is in production; promote another version to production to "
            f"replace it"
        )
    theirs = production_figure(production, stage, force)
    ours = candidate
    if theirs is not None and candidate.data != theirs.data:
        mine = version_of(client, name, version)
        shared = on_shared_rows(mine, candidate, production, theirs)
        if shared is not None:
            ours, theirs = shared
    decision, record, refusal = decide(version, stage, ours, production, theirs, force, stamp)
    if ours is not candidate:
        own = figure(production).describe()
        record += f" (own figures: v{version} {candidate.describe()}, production {own})"
    tag = f"wattgpu.promotion.{stage}"
    if decision == "refused":
        fenced(client, lease, client.set_model_version_tag, name, str(version), tag, record)
        raise PromotionRefused(refusal)
    state = stage_holders(client, name)
    replaced = state[stage] if state[stage] != version else None
    state[stage] = version
    if stage == "production" and state["staging"] == version:
        state["staging"] = None  # a version holds one stage: the higher
    done = Promotion(
        target,
        version,
        stage,
        ours.mdape,
        None if theirs is None else theirs.mdape,
        replaced if stage == "production" else None,
        decision == "forced",
    )
    entry = promotion_log.commit(client, lease, name, before, state, _entry_tags(done, record))
    if entry is None:
        return None
    notes = {str(replaced): f"replaced by v{version} in {stage} at {stamp}"} if replaced else {}
    _reconcile(client, lease, name, notes)
    fenced(client, lease, client.set_model_version_tag, name, str(version), tag, record)
    if not _follows(client, lease, name, entry):
        _reconcile(client, lease, name, notes)  # a late write of another holder came between
        if not _follows(client, lease, name, entry):
            raise promotion_lock.LockBusy(
                f"{name}'s aliases keep changing under this promotion's lock (late writes of "
                f"promotions that lost the lock)"
            )
    promotion_lock.check(lease)
    return done


def _entry_tags(done: Promotion, record: str) -> dict[str, str]:
    """What a log entry says about the promotion that wrote it (enough to report it again)."""
    return {
        "stage": done.stage,
        "version": str(done.version),
        "record": record[:4000],
        "candidate_mdape": f"{done.candidate_mdape:.6g}",
        "production_mdape": "" if done.production_mdape is None else f"{done.production_mdape:.6g}",
        "previous_production": str(done.previous_production or ""),
        "forced": str(done.forced).lower(),
    }


def _from_entry(target: str, entry: promotion_log.Entry) -> Promotion:
    tags = entry.tags
    return Promotion(
        target,
        int(tags["version"]),
        tags["stage"],
        float(tags["candidate_mdape"]),
        float(tags["production_mdape"]) if tags.get("production_mdape") else None,
        int(tags["previous_production"]) if tags.get("previous_production") else None,
        tags.get("forced") == "true",
    )


def stage_holders(client: Any, name: str) -> dict[str, int | None]:
    """Which version holds each stage: the log's head, or the aliases where there is no log."""
    found = promotion_log.head(client, name)
    if found is not None:
        return dict(found.state)
    aliases = client.get_registered_model(name).aliases or {}
    return {stage: int(aliases[stage]) if stage in aliases else None for stage in STAGES}


def _reconcile(
    client: Any, lease: promotion_lock.Lease, name: str, notes: dict[str, str]
) -> promotion_log.Entry | None:
    """Make aliases and stages say what the log's head says (every write fenced); return the head.

    Undoes whatever a holder that lost the lock wrote late; without a log (a registry of an
    older wattgpu) the aliases are taken as they are. Older log entries are deleted.
    """
    found = promotion_log.head(client, name)
    if found is not None:
        aliases = client.get_registered_model(name).aliases or {}
        for stage in STAGES:
            want, have = found.state[stage], aliases.get(stage)
            if want is not None and str(have) != str(want):
                fenced(client, lease, client.set_registered_model_alias, name, stage, str(want))
            elif want is None and have is not None:
                fenced(client, lease, client.delete_registered_model_alias, name, stage)
        promotion_log.prune(client, lease, name, found)
    _tidy(client, lease, name, notes)
    return found


def _follows(
    client: Any, lease: promotion_lock.Lease, name: str, entry: promotion_log.Entry
) -> bool:
    """Whether the lock is still ours, ``entry`` is the log's head and the aliases follow it.

    Raises:
        LockBusy: the lock is no longer ours (``promotion_lock.fence``).

    """
    promotion_lock.fence(client, lease)
    found = promotion_log.head(client, name)
    aliases = client.get_registered_model(name).aliases or {}
    return (
        found is not None
        and found.tags.get("owner") == lease.owner
        and all(str(aliases.get(s)) == str(entry.state[s]) for s in STAGES)
    )


def repair(
    client: Any,
    target: str,
    version: int,
    stage: str,
    owner: str,
    stamp: str,
    lost: promotion_lock.LockBusy,
) -> Promotion:
    """After a lost lock: take it again, put the registry in line with the log, say what happened.

    Returns the promotion when its commit is the log's head (it happened, and nothing came
    after it); otherwise tags the version "timed out" and raises ``lost``.
    """
    name = model_name(target)
    tag = f"wattgpu.promotion.{stage}"
    try:
        with promotion_lock.held(client, name) as lease:
            found = promotion_log.head(client, name)
            ours = found is not None and found.tags.get("owner") == owner
            replaced = found.tags.get("previous_production") if ours else None
            note = f"replaced by v{version} in {stage} at {stamp}"
            found = _reconcile(client, lease, name, {replaced: note} if replaced else {})
            if ours and found is not None and found.tags.get("owner") == owner:
                record = found.tags.get("record", "") + " (committed after its lock was lost)"
                fenced(client, lease, client.set_model_version_tag, name, str(version), tag, record)
                return _from_entry(target, found)
            holder = stage_holders(client, name)[stage]
            if holder != version:  # else another promotion put it there: its record stands
                now = "none" if holder is None else f"v{holder}"
                record = f"timed out {stage} at {stamp}: {lost}; {stage} is {now}"
                fenced(client, lease, client.set_model_version_tag, name, str(version), tag, record)
    except promotion_lock.LockBusy as again:
        raise promotion_lock.LockBusy(
            f"{lost}; the registry could not be checked afterwards ({again}); the next "
            f"promotion of {name} puts its aliases and stages back in line"
        ) from None
    raise lost


def _tidy(client: Any, lease: promotion_lock.Lease, name: str, notes: dict[str, str]) -> None:
    """Make the aliases tell one story, every write fenced.

    A version holds at most one of ``challenger``, ``staging``, ``production`` (the highest
    wins); its stage mirrors that alias; a version in stage Staging or Production that holds
    neither alias is archived, with ``notes`` (by version) or a plain note as its reason.
    """
    held: dict[str, list[str]] = {}
    for alias, version in (client.get_registered_model(name).aliases or {}).items():
        if alias in (CHALLENGER, *STAGES):
            held.setdefault(str(version), []).append(alias)
    for version, aliases in held.items():
        keep = next(a for a in (*reversed(STAGES), CHALLENGER) if a in aliases)
        for alias in sorted(set(aliases) - {keep}):
            fenced(client, lease, client.delete_registered_model_alias, name, alias)
        held[version] = [keep]
    for found in client.search_model_versions(f"name='{name}'"):
        version = str(found.version)
        alias = (held.get(version) or [""])[0]
        stage = None
        if alias in STAGES:
            stage = alias.capitalize()
            if ARCHIVED_TAG in found.tags:
                fenced(client, lease, client.delete_model_version_tag, name, version, ARCHIVED_TAG)
        elif found.current_stage in ("Staging", "Production"):
            stage = "Archived"
            note = notes.get(version, f"held no {found.current_stage.lower()} alias")
            fenced(client, lease, client.set_model_version_tag, name, version, ARCHIVED_TAG, note)
        if stage is not None and found.current_stage != stage:
            fenced(client, lease, _transition_stage, client, name, int(version), stage)


def _transition_stage(client: MlflowClient, name: str, version: int, stage: str) -> None:
    """Mirror the alias in the classic stages, where the installed MLflow still has them."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # stages are deprecated since MLflow 2.9
        try:
            client.transition_model_version_stage(name, str(version), stage=stage)
        except (MlflowException, AttributeError, NotImplementedError):
            pass  # an MLflow without stages: the alias alone carries the promotion
