"""The MLflow Model Registry: register tuned models, list them, load the promoted ones.

Registered models ``wattgpu-power``, ``wattgpu-itl`` and ``wattgpu-ttft``. A new version gets
the alias ``challenger``; it is created and tagged under the model's promotion lock
(``promotion_lock``), so a promotion running at the same time cannot take the alias away.
Promotion itself (the gate, the lock, the promotion log) is ``promotion``; its functions are
re-exported here, so ``registry`` is the one door to the registry.
"""

from __future__ import annotations

import datetime as dt
import os
import warnings
from typing import Any

import mlflow
import pandas as pd
from mlflow.exceptions import MlflowException
from mlflow.tracking import MlflowClient

from wattgpu.errors import ConfigError, ModelNotFound
from wattgpu.lifecycle import alias_cache, promotion_lock, tracking
from wattgpu.lifecycle.gate import (
    GATE_DATA_TAG,
    GATE_ROWS_TAG,
    GATE_TAG,
    LOGO_OOF_CSV,
    Figure,
    logo_mdape,
)
from wattgpu.lifecycle.names import no_alias
from wattgpu.lifecycle.promotion import (
    ARCHIVED_TAG,
    CHALLENGER,
    NOT_FOUND,
    STAGES,
    Promotion,
    PromotionRefused,
    alias_version,
    model_name,
    now,
    promote,
    promote_held,
    registry_client,
    repair,
    stage_holders,
    version_of,
)
from wattgpu.lifecycle.promotion_lock import fenced

__all__ = [
    "ARCHIVED_TAG",
    "CHALLENGER",
    "GATE_DATA_TAG",
    "GATE_ROWS_TAG",
    "GATE_TAG",
    "LOGO_OOF_CSV",
    "STAGES",
    "Promotion",
    "PromotionRefused",
    "list_versions",
    "load",
    "model_name",
    "model_uri",
    "production_version",
    "promote",
    "register",
    "register_candidate",
    "version_run_id",
]


def register(target: str, run_id: str | None = None) -> int:
    """Register the model of a tuning run (default: the latest finished one); return the version.

    The version gets alias ``challenger`` and tags: run id, data hash, the gate's figure (LOGO
    MdAPE of the run's evaluation and the data it was measured on) and the per-scenario
    evaluation metrics. It is created and tagged under the promotion lock, so a promotion
    running at the same time cannot take the alias away. If tagging fails, the version is
    deleted, so no half-written entry stays behind.
    """
    client, name, source, tags = _registration(target, run_id)
    with promotion_lock.held(client, name) as lease:
        return _register_held(client, lease, name, source, tags)


def register_candidate(target: str, run_id: str) -> tuple[int, Promotion | None]:
    """Register a tuning run's model and, when the target has no production version, promote it.

    What the main job does with each model it trains: both steps run under one hold of the
    promotion lock, so of several jobs finishing at once exactly one version becomes the first
    production one, and the others stay challengers (the first one has no production to be
    compared with, so it is not refused).

    Returns:
        The new version, and the promotion when it went to production (else ``None``).

    Raises:
        ConfigError, ModelNotFound: as ``register``.
        LockBusy: the lock was held too long by another promotion, or lost (then the registry
            was put back in line with its log before this returned).

    """
    client, name, source, tags = _registration(target, run_id)
    with promotion_lock.held(client, name) as lease:
        version = _register_held(client, lease, name, source, tags)
        if stage_holders(client, name)["production"] is not None:
            return version, None
        stamp = now()
        candidate = Figure(float(tags[GATE_TAG]), tags[GATE_DATA_TAG], tags[GATE_ROWS_TAG])
        try:
            done = promote_held(
                client, lease, target, version, "production", False, candidate, stamp
            )
            return version, done
        except promotion_lock.LockBusy as exc:
            lost = exc
    return version, repair(client, target, version, "production", lease.owner, stamp, lost)


def _registration(target: str, run_id: str | None) -> tuple[Any, str, str, dict[str, str]]:
    """The client, the model's name, the run's model URI and the new version's tags.

    The registered model is created on first use.
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
    client = registry_client()
    name = model_name(target)
    _ensure_model(client, name, target)
    return client, name, source, tags


def _register_held(
    client: Any, lease: promotion_lock.Lease, name: str, source: str, tags: dict[str, str]
) -> int:
    """Create the version, tag it and give it alias ``challenger``, with the lock held."""
    promotion_lock.fence(client, lease)
    # the client, not mlflow.register_model: that one prints that the model "already exists"
    # (we created it) and that it created the version, which the caller says in its own words
    logged = source.removeprefix("models:/") if source.startswith("models:/") else None
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        version = client.create_model_version(name, source, model_id=logged)
    try:
        for key, value in tags.items():
            client.set_model_version_tag(name, version.version, key, value)
        fenced(client, lease, client.set_registered_model_alias, name, CHALLENGER, version.version)
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
        GATE_TAG: f"{logo_mdape(oof):.6g}",
        GATE_DATA_TAG: data,
        GATE_ROWS_TAG: str(len(oof)),
    }
    metrics = run.data.metrics
    for key in sorted(metrics):
        if key.split("_")[0] in ("LOGO", "LOLO", "CV") and key.endswith(("mdape", "gpu_tau")):
            tags[f"wattgpu.{key}"] = f"{metrics[key]:.6g}"
    return tags


def production_version(target: str) -> int | None:
    """The version behind a target's ``production`` alias, or None when it has none."""
    held = alias_version(MlflowClient(), model_name(target), "production")
    return None if held is None else int(held.version)


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
    found = version_of(MlflowClient(), model_name(target), version)
    return found.tags.get("wattgpu.run_id") or found.run_id


def model_uri(target: str, alias: str) -> str:
    """``models:/wattgpu-TARGET@ALIAS``, checked to exist."""
    _aliased_version(target, alias)
    return f"models:/{model_name(target)}@{alias}"


def _aliased_version(target: str, alias: str) -> Any:
    """The version holding ``alias``, or ``ModelNotFound`` saying how to make one."""
    found = alias_version(MlflowClient(), model_name(target), alias)
    if found is None:
        raise _no_alias(target, alias)
    return found


def _no_alias(target: str, alias: str) -> ModelNotFound:
    return no_alias(target, alias, tracking.store_name())


def load(target: str, alias: str, check_requirements: bool = True) -> Any:
    """Load the pyfunc model holding ``alias``.

    The alias is resolved once, here, and the version it names is loaded (not the alias again).
    For an SQLite store that has not changed since the last load, the version's folder comes
    from ``alias_cache`` without opening MLflow's store (0.7 s of a command's start).
    ``check_requirements=False`` skips MLflow's comparison of the model's pinned packages with
    the installed ones (about 0.1 s a model): for commands that hide MLflow's warnings anyway.
    """
    name, tracking_uri = model_name(target), mlflow.get_tracking_uri()
    kept = alias_cache.lookup(tracking_uri, name, alias)
    if kept is not None:  # the store has not changed since MLflow last answered
        if kept[0] is None:
            raise _no_alias(target, alias)
        return mlflow.pyfunc.load_model(kept[1], suppress_warnings=not check_requirements)
    before = alias_cache.stamp_now(tracking_uri)
    try:
        version = int(_aliased_version(target, alias).version)
    except ModelNotFound:
        alias_cache.remember(tracking_uri, name, alias, (None, ""), before)
        raise
    location = MlflowClient().get_model_version_download_uri(name, str(version))
    alias_cache.remember(tracking_uri, name, alias, (version, _local_folder(location)), before)
    uri = f"models:/{name}/{version}"
    return mlflow.pyfunc.load_model(uri, suppress_warnings=not check_requirements)


def _local_folder(location: str) -> str:
    """A version's files as a local folder path ('' when they are not on this machine)."""
    if location.startswith("file://"):
        location = location.removeprefix("file://")
    return location if "://" not in location and os.path.isdir(location) else ""
