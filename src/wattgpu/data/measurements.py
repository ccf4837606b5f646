"""Reading measurement files into one table in the project's measurement schema."""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from pathlib import Path

import pandas as pd

from wattgpu.data.catalog import Catalog
from wattgpu.errors import DataError

TAIL_COLUMNS = ("ttft_p90_s", "ttft_p99_s", "itl_p90_s", "itl_p99_s")
REQUIRED_COLUMNS = ("gpu", "model", "scenario", "mean_power_w", "itl_s")
OPTIONAL_COLUMNS = (
    "request_rate_rps",
    "batch_size",
    "input_tokens",
    "output_tokens",
    "engine",
    "dtype",
    "num_gpus",
    "ttft_s",
    "throughput_tok_s",
    "energy_per_token_j",
    "source",
    "measured_at",
    # Which per-request ITL statistic `itl_s` is (e.g. "mean TPOT", "median ITL"); `itl_s` is
    # always the time between two tokens of one request.
    "itl_kind",
    # Wall time / all output tokens of the deployment (the WattGPU paper's *offline* "ITL").
    "inv_throughput_s_per_tok",
    # Release year of the serving software (see wattgpu.modeling.physical.workload.engine_year).
    "engine_year",
    # Server rows of a closed loop: the number of users, each sending its next request as soon
    # as its previous answer ends (``request_rate_rps`` is then the rate achieved).
    "concurrency",
    # The serving engine's release as the source names it (a version, or a container image tag
    # such as "nightly-dev" where the source gives no version); text, provenance beside `engine`.
    "engine_version",
    # The harness the row was measured under: a client of data/clients.csv (the importers write
    # it from each source's documentation). Blank: the client its load implies, as a query's
    # (a closed loop for `concurrency`, Poisson for a rate, a batch offline).
    "client",
    # Measured tails beside the medians `ttft_s` and `itl_s`: the p90 and p99 of TTFT over a
    # configuration's requests and of ITL over its pooled gaps (LLM-Pilot's rows; blank where a
    # source published medians or means only).
    *TAIL_COLUMNS,
)
SCENARIOS = ("offline", "server")
# Where a row came from, for people and error messages (the importers' provenance, the names as
# the source wrote them, the catalogues' notes, a run's bookkeeping): no model step reads them,
# so a job's training rows, and the folds it sends to its workers, go without them.
PROVENANCE_COLUMNS = (
    "source_file",
    "source_row",
    "source_id",
    "data_file",
    "gpu_as_written",
    "model_as_written",
    "gpu_source_name",
    "model_source_name",
    "gpu_notes",
    "llm_notes",
    "itl_samples",
    "completed_requests",
    "failed_requests",
    "wall_time_s",
    "experiment_duration_s",
)
DROPPED_SUFFIX = ".dropped.csv"
"""An importer's report of the rows it dropped and why, written beside its table (not read)."""
NUMERIC_COLUMNS = (
    "request_rate_rps",
    "batch_size",
    "input_tokens",
    "output_tokens",
    "num_gpus",
    "mean_power_w",
    "itl_s",
    "ttft_s",
    "throughput_tok_s",
    "energy_per_token_j",
    "inv_throughput_s_per_tok",
    "engine_year",
    "concurrency",
    *TAIL_COLUMNS,
)


def expand_paths(paths: Iterable[Path | str]) -> list[Path]:
    """Turn files and folders into the sorted list of CSV files they name.

    A folder's ``*.dropped.csv`` files (importer reports of dropped rows) are passed over.

    Raises:
        DataError: a path does not exist, or a folder holds no CSV file.

    """
    files: list[Path] = []
    for raw in paths:
        path = Path(raw)
        if path.is_dir():
            found = sorted(p for p in path.glob("*.csv") if not p.name.endswith(DROPPED_SUFFIX))
            if not found:
                raise DataError(f"measurement folder {path} holds no *.csv file")
            files.extend(found)
        elif path.is_file():
            files.append(path)
        else:
            raise DataError(
                f"measurement file not found: {path} (give a CSV file or a folder of them)"
            )
    return files


def read_measurements(paths: Iterable[Path | str]) -> pd.DataFrame:
    """Read and concatenate measurement CSVs, adding missing optional columns as blanks.

    Each row keeps the file it came from in ``data_file``. Numeric columns that hold text
    raise a ``DataError`` naming the file, column and first bad value.
    """
    frames = []
    for path in expand_paths(paths):
        try:
            frame = pd.read_csv(path, low_memory=False)
        except (pd.errors.ParserError, UnicodeDecodeError, pd.errors.EmptyDataError) as exc:
            raise DataError(f"measurement file {path} is not a readable CSV: {exc}") from None
        missing = [c for c in REQUIRED_COLUMNS if c not in frame.columns]
        if missing:
            raise DataError(
                f"measurement file {path} lacks column(s) {', '.join(missing)} "
                f"(required: {', '.join(REQUIRED_COLUMNS)})"
            )
        for column in OPTIONAL_COLUMNS:
            if column not in frame.columns:
                frame[column] = pd.NA
        for column in NUMERIC_COLUMNS:
            converted = pd.to_numeric(frame[column], errors="coerce")
            bad = frame[column].notna() & converted.isna()
            if bad.any():
                value = frame.loc[bad, column].iloc[0]
                raise DataError(
                    f"measurement file {path}: column {column} must be numeric, got {value!r} "
                    f"(row {int(bad.idxmax()) + 2})"
                )
            frame[column] = converted.astype(float)
        frame["data_file"] = str(path)
        frames.append(frame)
    return pd.concat(frames, ignore_index=True)


def resolve_names(frame: pd.DataFrame, catalog: Catalog) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Replace GPU and model names by their canonical catalogue names.

    Returns:
        The rows that resolved (canonical names in ``gpu``/``model``, the originals in
        ``gpu_as_written``/``model_as_written``), and the rows that did not.

    """
    out = frame.copy()
    out["gpu_as_written"] = out["gpu"]
    out["model_as_written"] = out["model"]
    gpu_map = {name: catalog.find_gpu(name) for name in out["gpu"].dropna().unique()}
    llm_map = {name: catalog.find_llm(name) for name in out["model"].dropna().unique()}
    out["gpu"] = out["gpu"].map(gpu_map)
    out["model"] = out["model"].map(llm_map)
    unresolved = out["gpu"].isna() | out["model"].isna()
    return out[~unresolved].reset_index(drop=True), frame[unresolved.to_numpy()]


def data_hash(paths: Iterable[Path | str]) -> str:
    """SHA-256 over the bytes of the given files, in order (the data version of a run)."""
    digest = hashlib.sha256()
    for path in paths:
        digest.update(Path(path).read_bytes())
    return digest.hexdigest()
