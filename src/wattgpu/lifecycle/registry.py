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
from wattgpu.lifecycle import tracking

STAGES = ("staging", "production")
CHALLENGER = "challenger"
GATE_TAG = "wattgpu.logo_mdape"


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
        except MlflowException:
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


def _version(client: MlflowClient, name: str, version: int) -> Any:
    try:
        return client.get_model_version(name, str(version))
    except MlflowException:
        raise ModelNotFound(
            f"{name} has no version {version}; `wattgpu models` lists them"
        ) from None


def _alias_version(client: MlflowClient, name: str, alias: str) -> Any | None:
    try:
        return client.get_model_version_by_alias(name, alias)
    except MlflowException:
        return None


def production_version(target: str) -> int | None:
    """The version behind a target's ``production`` alias, or None when it has none."""
    held = _alias_version(MlflowClient(), model_name(target), "production")
    return None if held is None else int(held.version)


def promote(target: str, version: int, stage: str, force: bool = False) -> Promotion:
    """Move alias ``stage`` to ``version`` if it passes the gate.

    Raises:
        ConfigError: unknown stage.
        ModelNotFound: the version does not exist.
        PromotionRefused: the candidate's LOGO MdAPE is worse than production's (and not forced).

    """
    if stage not in STAGES:
        raise ConfigError(f"stage must be one of {', '.join(STAGES)}; got {stage!r}")
    client = MlflowClient()
    name = model_name(target)
    candidate = _version(client, name, version)
    candidate_mdape = float(candidate.tags[GATE_TAG])
    production = _alias_version(client, name, "production")
    production_mdape = float(production.tags[GATE_TAG]) if production is not None else None
    worse = production_mdape is not None and candidate_mdape > production_mdape
    decision = "forced" if (worse and force) else ("refused" if worse else "accepted")
    stamp = dt.datetime.now(dt.UTC).isoformat(timespec="seconds")
    record = f"{decision} {stage} at {stamp}: candidate LOGO MdAPE {candidate_mdape:.3f} %"
    if production_mdape is not None:
        record += f" vs production v{production.version} {production_mdape:.3f} %"
    else:
        record += " (first version: no production version to compare with)"
    client.set_model_version_tag(name, str(version), f"wattgpu.promotion.{stage}", record)
    if decision == "refused":
        raise PromotionRefused(
            f"refused: {name} v{version} has LOGO MdAPE {candidate_mdape:.2f} %, "
            f"worse than production "
            f"v{production.version}'s {production_mdape:.2f} %; use --force to promote anyway"
        )
    client.set_registered_model_alias(name, stage, str(version))
    previous = None
    if stage == "production" and production is not None and int(production.version) != version:
        previous = int(production.version)
        client.set_model_version_tag(
            name, production.version, "wattgpu.archived", f"replaced by v{version} at {stamp}"
        )
    _transition_stage(client, name, version, stage)
    return Promotion(
        target, version, stage, candidate_mdape, production_mdape, previous, decision == "forced"
    )


def _transition_stage(client: MlflowClient, name: str, version: int, stage: str) -> None:
    """Mirror the alias in the classic stages (archiving the previous holder), where supported."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # stages are deprecated since MLflow 2.9
        try:
            client.transition_model_version_stage(
                name, str(version), stage=stage.capitalize(), archive_existing_versions=True
            )
        except (MlflowException, AttributeError, NotImplementedError):
            pass  # an MLflow without stages: the alias alone carries the promotion


def list_versions(target: str) -> pd.DataFrame:
    """Every version of a target's model: aliases, stage, creation time and key metrics."""
    client = MlflowClient()
    name = model_name(target)
    try:
        model = client.get_registered_model(name)
    except MlflowException:
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
            f"{name} has no version with alias {alias!r}; register one "
            f"(`wattgpu register --target {target}`) "
            f"and promote it (`wattgpu promote {target} --version N --to {alias}`)"
        )
    return f"models:/{name}@{alias}"


def load(target: str, alias: str) -> Any:
    """Load the pyfunc model holding ``alias``."""
    return mlflow.pyfunc.load_model(model_uri(target, alias))
