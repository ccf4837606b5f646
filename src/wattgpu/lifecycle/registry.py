"""The MLflow Model Registry: register tuned models, promote them behind a quality gate, list them.

Registered models ``wattgpu-power`` and ``wattgpu-itl``. A new version gets the alias
``challenger``; promotion moves the ``staging`` / ``production`` alias and, where the installed
MLflow still supports them, the classic stages (deprecated since MLflow 2.9, still working in 3.x).
The gate: a version whose leave-one-GPU-out MdAPE is worse than the current production version's
is refused unless forced; the decision and both numbers are recorded as version tags.
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

STAGES = ("staging", "production")
CHALLENGER = "challenger"
GATE_TAG = "wattgpu.logo_mdape"
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


def register(target: str, run_id: str | None = None) -> int:
    """Register the model of a tuning run (default: the latest finished one); return the version.

    The version gets alias ``challenger`` and tags: run id, data hash, LOGO MdAPE (the gate's
    number) and the per-scenario evaluation metrics. If tagging fails, the version is deleted, so
    no half-written entry stays behind.
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
    metrics = run.data.metrics
    client = MlflowClient()
    name = model_name(target)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            client.get_registered_model(name)
        except MlflowException as exc:
            if exc.error_code not in NOT_FOUND:
                raise
            client.create_registered_model(name, description=f"WattGPU {target} model (see README)")
        source = run.data.tags.get("wattgpu.model_uri")
        if not source:
            raise ModelNotFound(
                f"run {run_id} logged no model (tag wattgpu.model_uri); nothing to register"
            )
        version = mlflow.register_model(source, name)
    try:
        tags = {
            "wattgpu.run_id": run_id,
            "wattgpu.data_hash": run.data.tags.get("wattgpu.data_hash", ""),
            GATE_TAG: f"{metrics['best_LOGO_mdape']:.6g}",
        }
        for key in sorted(metrics):
            if key.split("_")[0] in ("LOGO", "LOLO", "CV") and key.endswith(("mdape", "gpu_tau")):
                tags[f"wattgpu.{key}"] = f"{metrics[key]:.6g}"
        for key, value in tags.items():
            client.set_model_version_tag(name, version.version, key, value)
        client.set_registered_model_alias(name, CHALLENGER, version.version)
    except Exception:
        client.delete_model_version(name, version.version)
        raise
    return int(version.version)


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


def production_version(target: str) -> int | None:
    """The version behind a target's ``production`` alias, or None when it has none."""
    held = _alias_version(MlflowClient(), model_name(target), "production")
    return None if held is None else int(held.version)


def promote(target: str, version: int, stage: str, force: bool = False) -> Promotion:
    """Move alias ``stage`` to ``version``, behind the quality gate, under the promotion lock.

    Staging takes any version with the project's tags: the gate compares it with production and
    records the comparison. Production refuses a version worse than the current one unless
    forced. The whole read-compare-write runs under ``promotion_lock``, so two promotions at
    once end as one of the two orders would.

    Raises:
        ConfigError: unknown stage, or production asked to step down to staging.
        ModelNotFound: the version does not exist or lacks the project's tags.
        PromotionRefused: the candidate's LOGO MdAPE is worse than production's (and not forced).
        LockBusy: another promotion kept the lock too long.

    """
    if stage not in STAGES:
        raise ConfigError(f"stage must be one of {', '.join(STAGES)}; got {stage!r}")
    client = MlflowClient()
    name = model_name(target)
    candidate_mdape = _gate_number(_version(client, name, version))
    with promotion_lock.held(client, name) as lease:
        # Read production only now, under the lock: what the gate compares with is what the
        # alias move below replaces.
        production = _alias_version(client, name, "production")
        if production is not None and int(production.version) == version:
            if stage == "staging":
                raise ConfigError(
                    f"{name} v{version} is in production; promote another version to "
                    f"production to replace it"
                )
        stamp = dt.datetime.now(dt.UTC).isoformat(timespec="seconds")
        decision, production_mdape, record = _gate(
            version, stage, candidate_mdape, production, force, stamp
        )
        client.set_model_version_tag(name, str(version), f"wattgpu.promotion.{stage}", record)
        if decision == "refused":
            raise PromotionRefused(
                f"refused: {name} v{version} has LOGO MdAPE {candidate_mdape:.2f} %, worse than "
                f"production v{production.version}'s {production_mdape:.2f} %; "
                f"use --force to promote anyway"
            )
        promotion_lock.check(lease)
        replaced = _move(client, name, version, stage, stamp)
    return Promotion(
        target,
        version,
        stage,
        candidate_mdape,
        production_mdape,
        replaced if stage == "production" else None,
        decision == "forced",
    )


def _gate_number(version: Any) -> float:
    """The version's LOGO MdAPE tag; ``ModelNotFound`` naming what is missing."""
    value = version.tags.get(GATE_TAG)
    try:
        return float(value)
    except (TypeError, ValueError):
        raise ModelNotFound(
            f"{version.name} v{version.version} lacks tag {GATE_TAG} (got {value!r}): it was not "
            f"registered by `wattgpu register`, so the quality gate cannot compare it"
        ) from None


def _gate(
    version: int,
    stage: str,
    candidate_mdape: float,
    production: Any | None,
    force: bool,
    stamp: str,
) -> tuple[str, float | None, str]:
    """The decision (accepted / refused / forced), production's number and the record to tag.

    Only a promotion to production can be refused; staging records the comparison. A
    production without the gate's tag (registered outside wattgpu) is compared with nothing
    when forced or for staging, and refuses an unforced promotion to production.
    """
    gated = stage == "production"
    if production is not None and int(production.version) == version:
        return "accepted", None, f"accepted {stage} at {stamp}: already in production"
    production_mdape = None
    if production is not None and (GATE_TAG in production.tags or (gated and not force)):
        production_mdape = _gate_number(production)
    worse = production_mdape is not None and candidate_mdape > production_mdape
    decision = "accepted"
    if worse and gated:
        decision = "forced" if force else "refused"
    record = f"{decision} {stage} at {stamp}: candidate LOGO MdAPE {candidate_mdape:.3f} %"
    if production_mdape is not None:
        record += f" vs production v{production.version} {production_mdape:.3f} %"
    elif production is not None:
        record += f" (production v{production.version} has no {GATE_TAG})"
    else:
        record += " (no production version to compare with)"
    if gated and production is not None and decision != "refused":
        record += f"; replaced v{production.version}"
    return decision, production_mdape, record


def _move(client: MlflowClient, name: str, version: int, stage: str, stamp: str) -> int | None:
    """Move the alias and make every version's aliases and stage tell one story.

    A version holds at most one of ``challenger``, ``staging``, ``production``; its stage
    mirrors that alias, and the version that lost the alias is archived. Returns that version.
    """
    previous = _alias_version(client, name, stage)
    client.set_registered_model_alias(name, stage, str(version))
    current = client.get_model_version(name, str(version))
    for alias in set(current.aliases or ()) - {stage}:
        if alias in (CHALLENGER, *STAGES):
            client.delete_registered_model_alias(name, alias)
    if ARCHIVED_TAG in current.tags:
        client.delete_model_version_tag(name, str(version), ARCHIVED_TAG)
    _transition_stage(client, name, version, stage.capitalize())
    if previous is None or int(previous.version) == version:
        return None
    client.set_model_version_tag(
        name, previous.version, ARCHIVED_TAG, f"replaced by v{version} in {stage} at {stamp}"
    )
    _transition_stage(client, name, int(previous.version), "Archived")
    return int(previous.version)


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
    client = MlflowClient()
    name = model_name(target)
    if _alias_version(client, name, alias) is None:
        raise ModelNotFound(
            f"{name} has no version with alias {alias!r} in {tracking.store_name()}; run "
            f"`wattgpu main`, or register one (`wattgpu register --target {target}`) and "
            f"promote it (`wattgpu promote --target {target} --version N --to {alias}`)"
        )
    return f"models:/{name}@{alias}"


def load(target: str, alias: str) -> Any:
    """Load the pyfunc model holding ``alias``."""
    return mlflow.pyfunc.load_model(model_uri(target, alias))
