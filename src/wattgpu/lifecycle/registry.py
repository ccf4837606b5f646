"""The MLflow Model Registry: register tuned models, promote them behind a quality gate, list them.

Registered models ``wattgpu-power`` and ``wattgpu-itl``. A new version gets the alias
``challenger``; promotion moves the ``staging`` / ``production`` alias and, where the installed
MLflow still supports them, the classic stages (deprecated since MLflow 2.9, still working in 3.x).
Registration and promotion of a model run under one lock (``promotion_lock``), each write fenced.

The gate (``gate``) compares the candidate's leave-one-GPU-out MdAPE with production's on the
same rows; the decision is recorded, after the move, as a version tag with both figures and the
data of each.
"""

from __future__ import annotations

import datetime as dt
import warnings
from dataclasses import dataclass
from typing import Any

import mlflow
import pandas as pd
from mlflow.exceptions import MlflowException
from mlflow.tracking import MlflowClient

from wattgpu.errors import ConfigError, ModelNotFound, WattgpuError
from wattgpu.lifecycle import promotion_lock, tracking
from wattgpu.lifecycle.gate import (
    GATE_DATA_TAG,
    GATE_ROWS_TAG,
    GATE_TAG,
    LOGO_OOF_CSV,
    Figure,
    decide,
    figure,
    on_shared_rows,
    production_figure,
)
from wattgpu.lifecycle.promotion_lock import fenced
from wattgpu.modeling.metrics import mdape

STAGES = ("staging", "production")
CHALLENGER = "challenger"
ARCHIVED_TAG = "wattgpu.archived"


class PromotionRefused(WattgpuError):
    """The quality gate refused a promotion."""


def model_name(target: str) -> str:
    """Registered model name of a target."""
    return f"wattgpu-{target}"


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


def register(target: str, run_id: str | None = None) -> int:
    """Register the model of a tuning run (default: the latest finished one); return the version.

    The version gets alias ``challenger`` and tags: run id, data hash, the gate's figure (LOGO
    MdAPE of the run's evaluation and the data it was measured on) and the per-scenario
    evaluation metrics. It is created and tagged under the promotion lock, so a promotion
    running at the same time cannot take the alias away. If tagging fails, the version is
    deleted, so no half-written entry stays behind.
    """
    run_id = run_id or tracking.latest_parent_run(target)
    run = tracking.get_run(run_id)
    if run.data.tags.get("wattgpu.target") != target:
        raise ConfigError(
            f"run {run_id} is not a {target} tuning run "
            f"(its target: {run.data.tags.get('wattgpu.target')!r})"
        )
    if run.info.status != "FINISHED":
        raise ModelNotFound(
            f"run {run_id} did not finish (status {run.info.status}); nothing to register"
        )
    source = run.data.tags.get("wattgpu.model_uri")
    if not source:
        raise ModelNotFound(
            f"run {run_id} logged no model (tag wattgpu.model_uri); nothing to register"
        )
    tags = _version_tags(run)
    client = MlflowClient()
    name = model_name(target)
    _ensure_model(client, name, target)
    with promotion_lock.held(client, name) as lease:
        promotion_lock.fence(client, lease)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            version = mlflow.register_model(source, name)
        try:
            for key, value in tags.items():
                client.set_model_version_tag(name, version.version, key, value)
            fenced(
                client, lease, client.set_registered_model_alias, name, CHALLENGER, version.version
            )
        except Exception:
            client.delete_model_version(name, version.version)
            raise
    return int(version.version)


def _ensure_model(client: MlflowClient, name: str, target: str) -> None:
    """Create the registered model on first use (safe when two registrations race)."""
    try:
        client.get_registered_model(name)
    except MlflowException as exc:
        if exc.error_code not in NOT_FOUND:
            raise
        try:
            client.create_registered_model(name, description=f"WattGPU {target} model (see README)")
        except MlflowException as again:
            if again.error_code != promotion_lock.ALREADY_EXISTS:
                raise


def _version_tags(run: Any) -> dict[str, str]:
    """A new version's tags: its run, the gate's figure and the run's split metrics."""
    oof = tracking.load_frame(run.info.run_id, LOGO_OOF_CSV)
    data = run.data.tags.get("wattgpu.data_hash", "")
    if oof.empty or not data:
        raise ModelNotFound(
            f"run {run.info.run_id} has no LOGO evaluation ({LOGO_OOF_CSV}) or no data hash "
            f"(tag wattgpu.data_hash), so the quality gate would have no figure; retrain it"
        )
    tags = {
        "wattgpu.run_id": run.info.run_id,
        "wattgpu.data_hash": data,
        GATE_TAG: f"{mdape(oof['true'], oof['pred']):.6g}",
        GATE_DATA_TAG: data,
        GATE_ROWS_TAG: str(len(oof)),
    }
    metrics = run.data.metrics
    for key in sorted(metrics):
        if key.split("_")[0] in ("LOGO", "LOLO", "CV") and key.endswith(("mdape", "gpu_tau")):
            tags[f"wattgpu.{key}"] = f"{metrics[key]:.6g}"
    return tags


# What the registry answers for a model, version or alias that does not exist. Any other error
# (an unreachable server, a broken store) propagates: it must not read as "no such version".
NOT_FOUND = ("RESOURCE_DOES_NOT_EXIST",)
NO_ALIAS = ("RESOURCE_DOES_NOT_EXIST", "INVALID_PARAMETER_VALUE")


def _version(client: MlflowClient, name: str, version: int) -> Any:
    try:
        return client.get_model_version(name, str(version))
    except MlflowException as exc:
        if exc.error_code not in NOT_FOUND:
            raise
        raise ModelNotFound(
            f"{name} has no version {version}; `wattgpu models` lists them"
        ) from None


def _alias_version(client: MlflowClient, name: str, alias: str) -> Any | None:
    try:
        return client.get_model_version_by_alias(name, alias)
    except MlflowException as exc:
        if exc.error_code not in NO_ALIAS:
            raise
        return None


def register_candidate(target: str, run_id: str) -> tuple[int, Promotion | None]:
    """Register a tuning run's model; promote it to production when the target has none yet.

    A first version goes straight to production, so that predict and recommend answer.

    Returns:
        The new version, and its promotion when there was one.

    """
    version = register(target, run_id)
    if production_version(target) is not None:
        return version, None
    return version, promote(target, version, "production")


def production_version(target: str) -> int | None:
    """The version behind a target's ``production`` alias, or None when it has none."""
    held = _alias_version(MlflowClient(), model_name(target), "production")
    return None if held is None else int(held.version)


def promote(target: str, version: int, stage: str, force: bool = False) -> Promotion:
    """Move alias ``stage`` to ``version``, behind the quality gate, under the promotion lock.

    Staging takes any version with the project's tags: the gate compares it with production and
    records the comparison. Production refuses a version worse than the current one, or one
    measured on other data, unless forced. The whole read-compare-write runs under
    ``promotion_lock``, each write fenced, so two promotions at once end as one of the two
    orders would; the decision is recorded after the move. A promotion that loses the lock
    records that it timed out instead.

    Raises:
        ConfigError: unknown stage, or production asked to step down to staging.
        ModelNotFound: the version does not exist or lacks the project's tags.
        PromotionRefused: the candidate is worse than production, or not comparable with it
            (and not forced).
        LockBusy: another promotion kept the lock too long, or this one lost it.

    """
    if stage not in STAGES:
        raise ConfigError(f"stage must be one of {', '.join(STAGES)}; got {stage!r}")
    client = MlflowClient()
    name = model_name(target)
    candidate = figure(_version(client, name, version))
    with promotion_lock.held(client, name) as lease:
        stamp = dt.datetime.now(dt.UTC).isoformat(timespec="seconds")
        try:
            return _promote_held(client, lease, target, version, stage, force, candidate, stamp)
        except promotion_lock.LockBusy as exc:
            # Not fenced: the lock is lost. It only notes on the candidate that this attempt
            # did not commit, so that no earlier record of it reads as a decision; if even that
            # fails, the LockBusy below still says what happened.
            record = f"timed out {stage} at {stamp}: {exc}"
            try:
                client.set_model_version_tag(
                    name, str(version), f"wattgpu.promotion.{stage}", record
                )
            except MlflowException:
                pass
            raise


def _promote_held(
    client: MlflowClient,
    lease: promotion_lock.Lease,
    target: str,
    version: int,
    stage: str,
    force: bool,
    candidate: Figure,
    stamp: str,
) -> Promotion:
    """The gate and the move, with the lock held: read production, decide, move, record."""
    name = model_name(target)
    # Read production only now, under the lock: what the gate compares with is what the
    # alias move below replaces.
    production = _alias_version(client, name, "production")
    if production is not None and int(production.version) == version and stage == "staging":
        raise ConfigError(
            f"{name} v{version} is in production; promote another version to production to "
            f"replace it"
        )
    theirs = production_figure(production, stage, force)
    ours = candidate
    if theirs is not None and candidate.data != theirs.data:
        mine = _version(client, name, version)
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
    replaced = _move(client, lease, name, version, stage, stamp)
    fenced(client, lease, client.set_model_version_tag, name, str(version), tag, record)
    return Promotion(
        target,
        version,
        stage,
        ours.mdape,
        None if theirs is None else theirs.mdape,
        replaced if stage == "production" else None,
        decision == "forced",
    )


def _move(
    client: MlflowClient,
    lease: promotion_lock.Lease,
    name: str,
    version: int,
    stage: str,
    stamp: str,
) -> int | None:
    """Move the alias (the commit), then make every version's aliases and stage tell one story.

    Returns the version that lost the alias, if another.
    """
    previous = _alias_version(client, name, stage)
    fenced(client, lease, client.set_registered_model_alias, name, stage, str(version))
    replaced = None if previous is None or int(previous.version) == version else previous.version
    _tidy(client, lease, name, {str(replaced): f"replaced by v{version} in {stage} at {stamp}"})
    return None if replaced is None else int(replaced)


def _tidy(
    client: MlflowClient, lease: promotion_lock.Lease, name: str, notes: dict[str, str]
) -> None:
    """Make the aliases tell one story, every write fenced; the aliases are the truth.

    A version holds at most one of ``challenger``, ``staging``, ``production`` (the highest
    wins); its stage mirrors that alias; a version in stage Staging or Production that holds
    neither alias is archived, with ``notes`` (by version) or a plain note as its reason. It also
    finishes a move that a promotion which lost its lock left half done.
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
            promotion_lock.fence(client, lease)
            _transition_stage(client, name, int(version), stage)


def _transition_stage(client: MlflowClient, name: str, version: int, stage: str) -> None:
    """Mirror the alias in the classic stages, where the installed MLflow still has them."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # stages are deprecated since MLflow 2.9
        try:
            client.transition_model_version_stage(name, str(version), stage=stage)
        except (MlflowException, AttributeError, NotImplementedError):
            pass  # an MLflow without stages: the alias alone carries the promotion


def list_versions(target: str) -> pd.DataFrame:
    """Every version of a target's model: aliases, stage, creation time and key metrics."""
    client = MlflowClient()
    name = model_name(target)
    try:
        model = client.get_registered_model(name)
    except MlflowException as exc:
        if exc.error_code not in NOT_FOUND:
            raise
        return pd.DataFrame(
            columns=["model", "version", "aliases", "stage", "created", "logo_mdape", "run_id"]
        )
    aliases: dict[str, list[str]] = {}
    for alias, version in (model.aliases or {}).items():
        aliases.setdefault(str(version), []).append(alias)
    rows = []
    for version in client.search_model_versions(f"name='{name}'"):
        rows.append(
            {
                "model": name,
                "version": int(version.version),
                "aliases": ",".join(sorted(aliases.get(str(version.version), []))),
                "stage": version.current_stage,
                "created": dt.datetime.fromtimestamp(
                    version.creation_timestamp / 1000, dt.UTC
                ).strftime("%Y-%m-%d %H:%M"),
                "logo_mdape": float(version.tags.get(GATE_TAG, "nan")),
                "LOGO_offline_mdape": float(version.tags.get("wattgpu.LOGO_offline_mdape", "nan")),
                "LOGO_server_mdape": float(version.tags.get("wattgpu.LOGO_server_mdape", "nan")),
                "run_id": version.run_id,
            }
        )
    return pd.DataFrame(rows).sort_values("version").reset_index(drop=True)


def version_run_id(target: str, version: int) -> str:
    """The tuning run a registered version came from."""
    found = _version(MlflowClient(), model_name(target), version)
    return found.tags.get("wattgpu.run_id") or found.run_id


def model_uri(target: str, alias: str) -> str:
    """``models:/wattgpu-TARGET@ALIAS``, checked to exist."""
    _aliased_version(target, alias)
    return f"models:/{model_name(target)}@{alias}"


def _aliased_version(target: str, alias: str) -> Any:
    """The version holding ``alias``, or ``ModelNotFound`` saying how to make one."""
    name = model_name(target)
    found = _alias_version(MlflowClient(), name, alias)
    if found is None:
        raise ModelNotFound(
            f"{name} has no version with alias {alias!r} in {tracking.store_name()}; run "
            f"`wattgpu main`, or register one (`wattgpu register --target {target}`) and "
            f"promote it (`wattgpu promote --target {target} --version N --to {alias}`)"
        )
    return found


def load(target: str, alias: str, check_requirements: bool = True) -> Any:
    """Load the pyfunc model holding ``alias``.

    The alias is resolved once, here, and the version it names is loaded (not the alias again).
    ``check_requirements=False`` skips MLflow's comparison of the model's pinned packages with
    the installed ones (about 0.1 s a model): for commands that hide MLflow's warnings anyway.
    """
    uri = f"models:/{model_name(target)}/{_aliased_version(target, alias).version}"
    return mlflow.pyfunc.load_model(uri, suppress_warnings=not check_requirements)
