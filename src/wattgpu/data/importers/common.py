"""What every importer shares: the result type, name resolution, the filters, validation, summary.

``finish_import`` takes an importer's tidy rows (names as the source writes them) and applies the
checks in the order of :mod:`wattgpu.data.importers` (catalogue names, a known weight format,
single GPU, the measurement suite), returning an :class:`ImportResult` of kept and dropped rows;
``summarise`` prints one as a short table.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from wattgpu.data.catalog import Catalog
from wattgpu.data.formats import KNOWN_FORMATS, SIXTEEN_BIT_FORMATS
from wattgpu.data.measurements import NUMERIC_COLUMNS, OPTIONAL_COLUMNS, REQUIRED_COLUMNS
from wattgpu.data.suites import derive_measurement_checks, measurement_expectations
from wattgpu.errors import DataError

SCHEMA_COLUMNS = (*REQUIRED_COLUMNS, *OPTIONAL_COLUMNS)
SIXTEEN_BIT = tuple(sorted(SIXTEEN_BIT_FORMATS))
# Where a raw row came from and what it is, as the source writes it: the first columns of every
# folder importer's report of dropped rows.
RAW_ROW_ID_COLUMNS = (
    "source_file",
    "source_row",
    "family",
    "task",
    "gpu",
    "model_source_name",
    "engine",
)
# Text columns of the schema, written as text (a version "0.19" must not become a number).
TEXT_COLUMNS = (
    "gpu",
    "model",
    "scenario",
    "engine",
    "engine_version",
    "dtype",
    "itl_kind",
    "source",
    "client",
)
# Whole numbers that a blank may interrupt: written as integers, not as floats.
COUNT_COLUMNS = (
    "source_row",
    "tensor_parallel",
    "pipeline_parallel",
    "attention_dp",
    "moe_tensor_parallel",
    "moe_expert_parallel",
    "requests",
    "itl_samples",
    "completed_requests",
    "failed_requests",
)


@dataclass
class ImportResult:
    """What an importer kept and what it dropped.

    Attributes:
        rows: kept rows in the measurement schema, plus ``itl_kind``,
            ``inv_throughput_s_per_tok``, ``gpu_source_name``, ``model_source_name`` and the
            source's provenance columns.
        dropped: the source's identifying columns of every dropped row, plus ``reason``.

    """

    rows: pd.DataFrame
    dropped: pd.DataFrame


def finish_import(
    tidy: pd.DataFrame,
    ids: pd.DataFrame,
    catalog: Catalog,
    *,
    single_gpu: bool,
    provenance: tuple[str, ...],
) -> ImportResult:
    """Resolve names, apply the filters in order, validate, and split kept from dropped."""
    tidy = tidy.reset_index(drop=True)
    ids = ids.reset_index(drop=True)
    for column in SCHEMA_COLUMNS:
        if column not in tidy.columns:
            tidy[column] = None
    reason = tidy["_reason"].astype(object).where(tidy["_reason"].notna(), None)
    gpu = tidy["_gpu_lookup"].map(lambda n: catalog.find_gpu(n) if pd.notna(n) else None)
    llm = tidy["model"].map(lambda n: catalog.find_llm(n) if pd.notna(n) else None)
    dtype = tidy["dtype"].astype(object)
    known = dtype.map(lambda d: str(d).lower() in KNOWN_FORMATS)
    num_gpus = pd.to_numeric(tidy["num_gpus"], errors="coerce")
    checks: list[tuple[pd.Series, Callable[[int], str]]] = [
        (gpu.isna(), lambda i: f"GPU name does not resolve: {tidy.at[i, 'gpu']!r}"),
        (llm.isna(), lambda i: f"LLM does not resolve: {tidy.at[i, 'model']!r}"),
        (
            dtype.notna() & ~known,
            lambda i: f"weights in a format the project does not know ({dtype.at[i]})",
        ),
        (
            (num_gpus > 1) & single_gpu,
            lambda i: f"multi-GPU ({int(num_gpus.at[i])} GPUs)",
        ),
    ]
    for mask, describe in checks:
        for i in tidy.index[mask.to_numpy() & reason.isna().to_numpy()]:
            reason.at[i] = describe(i)

    kept = tidy[reason.isna()].copy()
    kept["gpu_source_name"] = kept["gpu"]
    if "model_source_name" not in kept.columns:
        kept["model_source_name"] = kept["model"]
    kept["gpu"] = gpu[kept.index]
    kept["model"] = llm[kept.index]
    columns = [*SCHEMA_COLUMNS, "gpu_source_name", "model_source_name", *provenance]
    kept = _typed(kept[columns])
    failures = _validation_reasons(kept, catalog)
    reason[failures.dropna().index] = failures.dropna()

    rows = kept[failures.isna()].reset_index(drop=True)
    dropped = ids[reason.notna()].assign(reason=reason[reason.notna()]).reset_index(drop=True)
    return ImportResult(rows=rows, dropped=dropped)


def _typed(frame: pd.DataFrame) -> pd.DataFrame:
    """Numbers as float64, text as str (what the measurement suite expects of a read CSV)."""
    out = frame.copy()
    for column in out.columns:
        if column in NUMERIC_COLUMNS:
            out[column] = pd.to_numeric(out[column], errors="coerce").astype(float)
        elif column in COUNT_COLUMNS:
            out[column] = pd.to_numeric(out[column], errors="coerce").astype("Int64")
        elif column in TEXT_COLUMNS:
            out[column] = out[column].astype("str").where(out[column].notna(), None)
    return out


def _unexpected(derived: pd.DataFrame, kind: str, kwargs: dict[str, Any]) -> pd.Series | None:
    """Rows that break a column-map expectation (GE's semantics: blanks pass), else None."""
    column = kwargs.get("column")
    if column not in derived.columns:
        return None
    values = derived[column]
    if kind == "expect_column_values_to_not_be_null":
        return values.isna()
    if kind == "expect_column_values_to_be_in_set":
        return values.notna() & ~values.isin(kwargs["value_set"])
    if kind == "expect_column_values_to_be_between":
        numbers = pd.to_numeric(values, errors="coerce")
        bad = pd.Series(False, index=values.index)
        low, high = kwargs.get("min_value"), kwargs.get("max_value")
        if low is not None:
            bad |= numbers <= low if kwargs.get("strict_min") else numbers < low
        if high is not None:
            bad |= numbers >= high if kwargs.get("strict_max") else numbers > high
        return bad & numbers.notna()
    return None


def _validation_reasons(rows: pd.DataFrame, catalog: Catalog) -> pd.Series:
    """``fails validation: EXPECTATION(COLUMN)`` for each row the measurement suite flags.

    Great Expectations says which expectations failed and how many rows each; the rows
    themselves are found on the same derived check columns it validated.

    Raises:
        DataError: an expectation fails for the table as a whole (an importer bug).

    """
    reasons = pd.Series(None, index=rows.index, dtype=object)
    if rows.empty:
        return reasons
    # Imported here: Great Expectations is slow to import and only validation imports it.
    from wattgpu.data.validation import validate_table

    report = validate_table("measurements", rows, catalog)
    if report.success:
        return reasons
    derived = derive_measurement_checks(rows, catalog)
    specs = {
        (e["type"], e["kwargs"].get("column")): e["kwargs"] for e in measurement_expectations()
    }
    for result in report.results:
        if result.success:
            continue
        label = f"{result.expectation}({result.column})"
        mask = _unexpected(
            derived, result.expectation, specs.get((result.expectation, result.column), {})
        )
        if mask is None or (
            result.unexpected_count is not None and int(mask.sum()) != result.unexpected_count
        ):
            raise DataError(
                f"imported rows fail {label} as a table, not row by row; this is an importer "
                f"bug (error: {result.error or 'none'})"
            )
        flagged = pd.Series(mask.to_numpy(), index=rows.index) & reasons.isna()
        reasons[flagged] = f"fails validation: {label}"
    return reasons


def _examples(frame: pd.DataFrame, n: int = 3) -> str:
    column = next(c for c in ("model_source_name", "model") if c in frame.columns)
    names = list(dict.fromkeys(str(v) for v in frame[column].dropna()))
    return ", ".join(names[:n]) + (", ..." if len(names) > n else "")


# What a raw file in an unexpected layout raises while it is read.
UNREADABLE = (
    KeyError,
    TypeError,
    ValueError,
    ZeroDivisionError,
    UnicodeDecodeError,
    pd.errors.ParserError,
    pd.errors.EmptyDataError,
)


def read_raw_files(
    raw_dir: Path,
    data_set: str,
    read_file: Callable[[Path, str], list[dict[str, Any]]],
    none_found: str,
) -> pd.DataFrame:
    """Every tidy row that ``read_file(path, path relative to raw_dir)`` finds under ``raw_dir``.

    Raises:
        DataError: ``raw_dir`` is not a folder, no file yields a row (``none_found``, with
            ``{raw_dir}`` filled in, says what was expected), or a file is unreadable (named,
            with the reason).

    """
    raw_dir = Path(raw_dir)
    if not raw_dir.is_dir():
        raise DataError(f"{data_set} folder not found: {raw_dir} (give the folder of raw files)")
    rows: list[dict[str, Any]] = []
    for path in sorted(p for p in raw_dir.rglob("*") if p.is_file()):
        rel = path.relative_to(raw_dir).as_posix()
        try:
            rows.extend(read_file(path, rel))
        except UNREADABLE as exc:
            raise DataError(f"{data_set} file {rel} is not in a known format: {exc}") from None
    if not rows:
        raise DataError(none_found.format(raw_dir=raw_dir))
    return pd.DataFrame(rows)


def summarise(result: ImportResult) -> str:
    """A short table: rows kept, multi-GPU rows kept, rows without ITL, dropped rows by reason."""
    rows, dropped = result.rows, result.dropped
    multi = int((rows["num_gpus"] > 1).sum()) if len(rows) else 0
    no_itl = int(rows["itl_s"].isna().sum()) if len(rows) else 0
    table = [
        ("rows kept", len(rows), ""),
        ("  multi-GPU (per-GPU power)", multi, ""),
        ("  without itl_s", no_itl, ""),
        ("rows dropped", len(dropped), ""),
    ]
    if len(dropped):
        for reason, count in dropped["reason"].value_counts(sort=True).items():
            examples = _examples(dropped[dropped["reason"] == reason])
            table.append((f"  {reason}", int(count), f"e.g. {examples}"))
    width = max(len(label) for label, _, _ in table)
    return "\n".join(
        f"{label:<{width}} {count:>6}  {examples}".rstrip() for label, count, examples in table
    )
