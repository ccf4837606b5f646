"""Asking for predictions: from the registry in this process, or from a running model server."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pandas as pd

from wattgpu.config import Settings
from wattgpu.errors import ConfigError, DataError, ModelNotFound, QueryError, WattgpuError
from wattgpu.lifecycle import alias_cache, store_creation
from wattgpu.lifecycle.names import model_name, no_alias
from wattgpu.lifecycle.served import ServedModel, read_folder
from wattgpu.lifecycle.serving import clean_message
from wattgpu.modeling.answering.inference import (
    FLOAT_OUTPUTS,
    LOAD_COLUMNS,
    OUTPUT_COLUMNS,
    SETUP_COLUMNS,
)
from wattgpu.modeling.answering.tails import PERCENTILES
from wattgpu.modeling.physical.targets import OPTIONAL_TARGETS, UNIT

ANSWER_COLUMNS = ("prediction", "lower", "upper")
# A latency target's percentiles beside its median (``answering.tails``), where it gives them.
TAIL_ANSWERS = (*PERCENTILES, "tails")
# The columns of one query that both targets' answers share (names, load and serving set-up).
QUERY_COLUMNS = tuple(
    c for c in OUTPUT_COLUMNS if c in ("gpu", "model", "scenario", *LOAD_COLUMNS, *SETUP_COLUMNS)
)


def read_queries(path: Path) -> pd.DataFrame:
    """Query rows from a CSV with the REST request's columns."""
    what = "a CSV file of query rows: gpu, model, scenario and the load"
    if Path(path).is_dir():
        raise DataError(f"query file {path} is a directory; give {what}")
    if not Path(path).is_file():
        raise DataError(f"query file not found: {path} (give {what})")
    try:
        return pd.read_csv(path)
    except (pd.errors.ParserError, pd.errors.EmptyDataError, UnicodeDecodeError) as exc:
        raise DataError(f"query file {path} is not a readable CSV: {exc}") from None


def ask_server(url: str, queries: pd.DataFrame, timeout: float = 60.0) -> pd.DataFrame:
    """POST the queries to a model server's ``/invocations``; a 400 becomes a ``QueryError``."""
    endpoint = url.rstrip("/")
    if not endpoint.endswith("/invocations"):
        endpoint += "/invocations"
    body = json.dumps({"dataframe_split": json.loads(queries.to_json(orient="split", index=False))})
    request = urllib.request.Request(endpoint, body.encode(), {"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            payload = json.loads(response.read())
    except urllib.error.HTTPError as exc:
        detail = exc.read(64 * 1024).decode(errors="replace")
        try:
            detail = str(json.loads(detail).get("message", detail))
        except (json.JSONDecodeError, AttributeError):
            pass
        # plain `mlflow models serve` prefixes the request's repr and may add a trace
        detail = clean_message(detail, limit=500)
        if exc.code == 400:
            raise QueryError(detail) from None
        raise ConfigError(
            f"model server at {endpoint} answered HTTP {exc.code}: {detail}"
        ) from None
    except (urllib.error.URLError, TimeoutError, ConnectionError) as exc:
        reason = getattr(exc, "reason", exc)
        raise ConfigError(f"cannot reach the model server at {endpoint}: {reason}") from None
    return pd.DataFrame(payload["predictions"])


def ask_models(
    settings: Settings,
    queries: pd.DataFrame,
    targets: tuple[str, ...],
    alias: str = "production",
    url: str | None = None,
) -> pd.DataFrame:
    """Ask the registry's ``alias`` models (or the server at ``url``) for one or more targets.

    With several targets the answer is one wide row per query; an optional target (TTFT) with
    no model under ``alias`` is then left out rather than failing the others.
    """
    answers = {}
    for target in targets:
        if url:
            answer = ask_server(url, queries)
        else:
            try:
                model = load_model(settings, target, alias)
            except ModelNotFound:
                if len(targets) > 1 and target in OPTIONAL_TARGETS:
                    continue
                raise
            answer = ask_loaded_model(model, queries)
        refuse_ignored_setup(queries, answer, target)
        # the served answer holds None (JSON null) where there is no number: NaN here
        for column in FLOAT_OUTPUTS:
            if column in answer.columns:
                answer[column] = pd.to_numeric(answer[column]).astype(float)
        answers[target] = answer
    targets = tuple(answers)
    if len(targets) == 1:
        return answers[targets[0]]
    first = answers[targets[0]]
    wide = first[[c for c in QUERY_COLUMNS if c in first.columns]].copy()
    for target in targets:
        unit = UNIT[target].lower()
        for column in ANSWER_COLUMNS:
            wide[f"{target}_{column}_{unit}"] = answers[target][column].to_numpy()
        for column in TAIL_ANSWERS:  # power has none, nor a model logged before them
            if column in answers[target].columns:
                name = f"{target}_{column}_{unit}" if column in PERCENTILES else f"{target}_tails"
                wide[name] = answers[target][column].to_numpy()
        for column in ("novelty", "analogs"):  # a model logged before them has neither
            if column in answers[target].columns:
                wide[f"{target}_{column}"] = answers[target][column].to_numpy()
    texts = zip(*(answers[t]["warnings"] for t in targets), strict=True)
    wide["warnings"] = [merged_warnings(dict(zip(targets, row, strict=True))) for row in texts]
    return wide


def refuse_ignored_setup(queries: pd.DataFrame, answer: pd.DataFrame, target: str) -> None:
    """Refuse an answer that ignored the client or engine knobs its queries state.

    A model logged before they were query columns answers without a ``client`` column, and its
    checks drop the columns they do not know: its answer would silently be the load's own.

    Raises:
        ConfigError: the queries state one and the answer has no ``client``.

    """
    stated = [c for c in SETUP_COLUMNS if c in queries.columns and queries[c].notna().any()]
    if stated and "client" not in answer.columns:
        raise ConfigError(
            f"the {target} model predates the client and engine knobs and would ignore them: "
            "use a model trained since (wattgpu main), or ask without them"
        )


def merged_warnings(by_target: dict[str, str]) -> str:
    """One row's warnings of several models: shared ones once, the others named by target.

    ``{"power": "a; b", "ttft": "a; c"}`` -> ``"a; power: b; ttft: c"``: a warning of the TTFT
    model alone (trained on servers only) must not read as one about the power answer.
    """
    split = {t: [w for w in (text or "").split("; ") if w] for t, text in by_target.items()}
    shared = [
        w for w in dict.fromkeys(sum(split.values(), [])) if all(w in v for v in split.values())
    ]
    own = [f"{t}: {w}" for t, ws in split.items() for w in ws if w not in shared]
    return "; ".join([*shared, *own])


def load_model(settings: Settings, target: str, alias: str) -> Any:
    """The registry's ``alias`` model of ``target``: a ``ServedModel``, or MLflow's pyfunc.

    Where the store is an SQLite file whose alias is known (``alias_cache``) and the version's
    folder holds one of our models, it is read from there without MLflow (whose import alone is
    1-1.5 s of a one-query command); anything else is asked of MLflow.

    Raises:
        ModelNotFound: no store, or no version holds the alias.

    """
    kept = alias_cache.lookup(settings.tracking_uri, model_name(target), alias)
    if kept is not None and kept[0] is None:  # kept only for an SQLite store: name its file
        raise no_alias(target, alias, str(store_creation.sqlite_file(settings.tracking_uri)))
    if kept is not None:
        model = read_folder(Path(kept[1]))
        if model is not None:
            return model
    from wattgpu.lifecycle import registry, tracking

    tracking.configure(settings.tracking_uri, must_exist=True)
    # the commands asking hide MLflow's warnings: skip its requirements check
    return registry.load(target, alias, check_requirements=False)


def ask_loaded_model(model: Any, queries: pd.DataFrame, with_tails: bool = True) -> pd.DataFrame:
    """Run a loaded model, turning its 400-style errors back into ``QueryError``.

    ``with_tails=False`` spares a model read from its folder the tails' simulation (p90 and p99
    then blank); a model MLflow loaded answers in full.
    """
    # Models logged before issue 10 type every input as double, and MLflow refuses to cast
    # int64 to it silently; today's models take the values as they are.
    queries = queries.apply(lambda c: c.astype(float) if pd.api.types.is_integer_dtype(c) else c)
    if isinstance(model, ServedModel):
        return _ask_served(model, queries, with_tails)
    from mlflow.exceptions import MlflowException

    try:
        return model.predict(queries)
    except MlflowException as exc:
        raise QueryError(clean_message(exc.message, limit=500)) from None


def _ask_served(model: ServedModel, queries: pd.DataFrame, with_tails: bool) -> pd.DataFrame:
    """``ServedModel.answer``, its errors worded as MLflow's pyfunc (``pyfunc.WattgpuModel``)."""
    try:
        return model.answer(queries, with_tails)
    except WattgpuError as exc:
        raise QueryError(clean_message(str(exc), limit=500)) from None
    except Exception as exc:  # a bug of ours, named as the served model names it
        raise QueryError(f"internal error while predicting ({type(exc).__name__})") from exc
