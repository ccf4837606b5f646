"""Validating the data tables with Great Expectations.

The catalogues, the measurements and the serving tables the simulated serving loop reads
(``engine_lines.csv``, ``clients.csv``, ``length_distributions.csv``). The only module that
imports Great Expectations. Suites are read from ``expectations/*.json`` (built by
:mod:`wattgpu.data.suites`, written by :func:`write_suites`); each table gets its derived check
columns, and every table is validated in one ephemeral context through a checkpoint. When a
docs folder is given, the checkpoint's ``UpdateDataDocsAction`` writes Data Docs HTML there
(``<docs_dir>/index.html``).
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import great_expectations as gx
import pandas as pd
from great_expectations.checkpoint import UpdateDataDocsAction
from great_expectations.core.run_identifier import RunIdentifier
from great_expectations.data_context.types.base import (
    DataContextConfig,
    InMemoryStoreBackendDefaults,
    ProgressBarsConfig,
)

from wattgpu.config import EXPECTATIONS_DIR, SHIPPED_DATA_DIR
from wattgpu.data.catalog import Catalog
from wattgpu.data.clients import CLIENTS_FILE, LENGTHS_FILE, kinds_of
from wattgpu.data.engine_lines import ENGINE_LINES_FILE
from wattgpu.data.measurements import read_measurements
from wattgpu.data.serving_suites import (
    CLIENT_DTYPES,
    ENGINE_LINE_DTYPES,
    LENGTH_TEXT,
    derive_client_checks,
    derive_engine_line_checks,
    derive_length_checks,
)
from wattgpu.data.suites import (
    TABLES,
    build_suites,
    derive_gpu_checks,
    derive_llm_checks,
    derive_measurement_checks,
)
from wattgpu.errors import DataError, ValidationFailed

MAX_EXAMPLES = 5
# The serving tables: file name and how its text columns are read.
SERVING_FILES = {
    "engine_lines": (ENGINE_LINES_FILE, ENGINE_LINE_DTYPES),
    "clients": (CLIENTS_FILE, CLIENT_DTYPES),
    "length_distributions": (LENGTHS_FILE, dict.fromkeys(LENGTH_TEXT, str)),
}
DOCS_SITE = "wattgpu_local_site"
RUN_NAME = "wattgpu-validate"
# SUMMARY keeps up to 20 failing values and their row indexes, enough for 5 distinct examples.
_RESULT_FORMAT = {"result_format": "SUMMARY", "partial_unexpected_count": 20}


@dataclass
class ExpectationResult:
    """The outcome of one expectation on one table.

    Attributes:
        table: one of ``suites.TABLES``.
        expectation: the expectation type, e.g. ``expect_column_values_to_be_between``.
        column: the column it checks, or ``None`` for a table-level expectation.
        success: whether it held.
        unexpected_count: how many rows broke it (``None`` for aggregate expectations).
        examples: up to five distinct failing values (for derived checks, the names as written).
        error: the error Great Expectations hit while evaluating it, if any (e.g. missing column).

    """

    table: str
    expectation: str
    column: str | None
    success: bool
    unexpected_count: int | None
    examples: list = field(default_factory=list)
    error: str | None = None


@dataclass
class TableReport:
    """All expectation results of one table.

    Attributes:
        table: one of ``suites.TABLES``.
        success: whether every expectation held.
        results: one entry per expectation, in suite order.
        rows: the number of rows validated.

    """

    table: str
    success: bool
    results: list[ExpectationResult]
    rows: int


def suite_to_json(spec: Mapping[str, Any]) -> dict[str, Any]:
    """Return the stored JSON form (``suite.to_json_dict()``) of a suite built in code."""
    return gx.ExpectationSuite(**spec).to_json_dict()


def load_suite(table: str, suites_dir: Path = EXPECTATIONS_DIR) -> gx.ExpectationSuite:
    """Read ``<suites_dir>/<table>.json`` into an expectation suite.

    Raises:
        DataError: the file is missing or is not valid JSON.

    """
    path = Path(suites_dir) / f"{table}.json"
    try:
        spec = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise DataError(
            f"expectation suite not found: {path} "
            "(write it with `python -m wattgpu.data.validation`)"
        ) from None
    except json.JSONDecodeError as exc:
        raise DataError(f"expectation suite {path} is not valid JSON: {exc}") from None
    return gx.ExpectationSuite(**spec)


def data_docs_index(docs_dir: Path) -> Path:
    """Return the Data Docs entry page that validation writes under ``docs_dir``."""
    return Path(docs_dir) / "index.html"


def _context(docs_dir: Path | None) -> Any:
    """Return an in-memory context: no analytics, no progress bars, Data Docs only where asked."""
    sites = {}
    if docs_dir is not None:
        sites[DOCS_SITE] = {
            "class_name": "SiteBuilder",
            "store_backend": {
                "class_name": "TupleFilesystemStoreBackend",
                "base_directory": str(Path(docs_dir).resolve()),
            },
            "site_index_builder": {"class_name": "DefaultSiteIndexBuilder"},
        }
    config = DataContextConfig(
        store_backend_defaults=InMemoryStoreBackendDefaults(init_temp_docs_sites=False),
        data_docs_sites=sites,
        analytics_enabled=False,
        progress_bars=ProgressBarsConfig(globally=False, metric_calculations=False),
    )
    return gx.get_context(mode="ephemeral", project_config=config)


def _derive(
    table: str, frame: pd.DataFrame, catalog: Catalog | None, frames: Mapping[str, pd.DataFrame]
) -> pd.DataFrame:
    """The table with its derived check columns; tables it names are read from ``frames``.

    A measurement's client is looked up in ``frames["clients"]`` and a client's distribution in
    ``frames["length_distributions"]`` where they are validated together, else in the shipped
    tables.
    """
    if table == "gpus":
        return derive_gpu_checks(frame)
    if table == "llms":
        return derive_llm_checks(frame)
    if table == "engine_lines":
        return derive_engine_line_checks(frame)
    if table == "clients":
        return derive_client_checks(frame, _names(frames, "length_distributions", "distribution"))
    if table == "length_distributions":
        return derive_length_checks(frame)
    if catalog is None:
        raise ValueError("validating measurements needs the catalogue to resolve names; got None")
    clients = frames.get("clients")
    return derive_measurement_checks(
        frame,
        catalog,
        None if clients is None else kinds_of(clients),
        _names(frames, "engine_lines", "engine"),
    )


def _names(frames: Mapping[str, pd.DataFrame], table: str, column: str) -> list[str] | None:
    """The names in ``frames[table][column]``; None where that table is not being validated."""
    frame = frames.get(table)
    if frame is None or column not in frame.columns:
        return None
    return [str(name) for name in frame[column].dropna()]


def _plain(value: Any) -> Any:
    """Return a JSON-friendly Python scalar (numpy scalars unwrapped, NaN as None)."""
    if hasattr(value, "item"):
        value = value.item()
    if isinstance(value, float) and math.isnan(value):
        return None
    return value


def _error_message(exception_info: Any) -> str | None:
    """Return the first exception message in a result's ``exception_info`` (flat or per metric)."""
    if not isinstance(exception_info, dict):
        return None
    infos = [exception_info] if "raised_exception" in exception_info else exception_info.values()
    for info in infos:
        if isinstance(info, dict) and info.get("raised_exception"):
            return str(info.get("exception_message") or "error").splitlines()[0]
    return None


def _examples(result: Any, meta: Mapping[str, Any], frame: pd.DataFrame) -> list:
    """Up to ``MAX_EXAMPLES`` distinct failing values of one expectation result."""
    details = result.result or {}
    sources = [c for c in meta.get("examples_from") or [] if c in frame.columns]
    if sources:
        rows = frame.loc[list(details.get("partial_unexpected_index_list") or []), sources]
        values = [
            _plain(row[sources[0]]) if len(sources) == 1 else {c: _plain(row[c]) for c in sources}
            for _, row in rows.iterrows()
        ]
    elif "partial_unexpected_list" in details:
        values = [_plain(v) for v in details["partial_unexpected_list"]]
    elif not result.success and "observed_value" in details:
        values = [f"observed {details['observed_value']}"]
    else:
        values = []
    distinct: dict[str, Any] = {}
    for value in values:
        distinct.setdefault(repr(value), value)
    return list(distinct.values())[:MAX_EXAMPLES]


def _run_table(
    context: Any,
    table: str,
    frame: pd.DataFrame,
    catalog: Catalog | None,
    frames: Mapping[str, pd.DataFrame],
    suites_dir: Path,
    write_docs: bool,
) -> TableReport:
    derived = _derive(table, frame, catalog, frames)
    suite = context.suites.add(load_suite(table, suites_dir))
    batch = (
        context.data_sources.add_pandas(f"wattgpu_{table}")
        .add_dataframe_asset(table)
        .add_batch_definition_whole_dataframe(f"{table}_whole")
    )
    definition = context.validation_definitions.add(
        gx.ValidationDefinition(name=f"wattgpu_{table}", data=batch, suite=suite)
    )
    actions = [UpdateDataDocsAction(name="data_docs", site_names=[DOCS_SITE])] if write_docs else []
    checkpoint = context.checkpoints.add(
        gx.Checkpoint(
            name=f"wattgpu_{table}_checkpoint",
            validation_definitions=[definition],
            actions=actions,
            result_format=_RESULT_FORMAT,
        )
    )
    outcome = checkpoint.run(
        batch_parameters={"dataframe": derived}, run_id=RunIdentifier(run_name=RUN_NAME)
    )
    validation = next(iter(outcome.run_results.values()))
    order = {e.id: i for i, e in enumerate(suite.expectations)}
    results = []
    for result in sorted(validation.results, key=lambda r: order.get(r.expectation_config.id, 0)):
        config = result.expectation_config
        details = result.result or {}
        results.append(
            ExpectationResult(
                table=table,
                expectation=config.type,
                column=config.kwargs.get("column"),
                success=bool(result.success),
                unexpected_count=details.get("unexpected_count"),
                examples=[] if result.success else _examples(result, config.meta or {}, derived),
                error=_error_message(result.exception_info),
            )
        )
    return TableReport(
        table=table,
        success=all(r.success for r in results),
        results=results,
        rows=len(frame),
    )


def validate_frames(
    frames: Mapping[str, pd.DataFrame],
    catalog: Catalog | None,
    docs_dir: Path | None = None,
    suites_dir: Path = EXPECTATIONS_DIR,
) -> list[TableReport]:
    """Validate several tables in one Great Expectations context.

    Args:
        frames: table name (one of ``TABLES``) to its rows; not modified. A measurement's
            client, and a client's length distribution, are checked against the ``clients`` and
            ``length_distributions`` given here, else against the shipped ones.
        catalog: the catalogue that measurement names resolve through (needed for measurements).
        docs_dir: when given, Data Docs HTML for these validations is written there.
        suites_dir: the folder holding ``<table>.json`` suites.

    Returns:
        One report per table, in the order given.

    Raises:
        ValueError: an unknown table name, or measurements without a catalogue.
        DataError: a suite file is missing or unreadable.

    """
    unknown = [t for t in frames if t not in TABLES]
    if unknown:
        raise ValueError(f"unknown table {unknown[0]!r}; expected one of {', '.join(TABLES)}")
    context = _context(docs_dir)
    return [
        _run_table(context, table, frame, catalog, frames, Path(suites_dir), docs_dir is not None)
        for table, frame in frames.items()
    ]


def validate_table(
    table: str,
    frame: pd.DataFrame,
    catalog: Catalog | None = None,
    docs_dir: Path | None = None,
    suites_dir: Path = EXPECTATIONS_DIR,
) -> TableReport:
    """Validate one table against its suite.

    Args:
        table: one of ``TABLES``.
        frame: the rows, as read from the CSV; not modified.
        catalog: the catalogue that measurement names resolve through (needed for measurements).
        docs_dir: when given, Data Docs HTML is written there.
        suites_dir: the folder holding ``<table>.json`` suites.

    Returns:
        The table's report, with up to five failing examples per expectation.

    """
    return validate_frames({table: frame}, catalog, docs_dir, suites_dir)[0]


def validate_all(
    gpus_csv: Path,
    llms_csv: Path,
    measurement_paths: Iterable[Path | str],
    docs_dir: Path | None = None,
    suites_dir: Path = EXPECTATIONS_DIR,
    serving_dir: Path = SHIPPED_DATA_DIR,
) -> list[TableReport]:
    """Read and validate the catalogues, the measurements and the serving tables.

    Args:
        gpus_csv: the GPU catalogue (default: the shipped ``gpus.csv``).
        llms_csv: the LLM catalogue (default: the shipped ``llms.csv``).
        measurement_paths: measurement CSV files or folders of them.
        docs_dir: when given, Data Docs HTML is written there; open ``data_docs_index(docs_dir)``.
        suites_dir: the folder holding ``<table>.json`` suites.
        serving_dir: the folder of ``engine_lines.csv``, ``clients.csv`` and
            ``length_distributions.csv`` (default: the shipped ones, which the prior reads).

    Returns:
        Reports for ``TABLES`` (the catalogues, the measurements, then the serving tables).

    Raises:
        DataError: a file is missing, unreadable or lacks a required column, or a catalogue
            name is duplicated or ambiguous (from the loaders).

    """
    catalog = Catalog.load(Path(gpus_csv), Path(llms_csv))
    measurements = read_measurements(measurement_paths)
    frames = {
        "gpus": catalog.gpus.reset_index(drop=True),
        "llms": catalog.llms.reset_index(drop=True),
        "measurements": measurements,
        **{table: read_serving_table(table, serving_dir) for table in SERVING_FILES},
    }
    return validate_frames(frames, catalog, docs_dir, suites_dir)


def read_serving_table(table: str, directory: Path = SHIPPED_DATA_DIR) -> pd.DataFrame:
    """Read ``engine_lines``, ``clients`` or ``length_distributions`` from ``directory``.

    Raises:
        DataError: the file is missing or not a readable CSV.

    """
    name, dtypes = SERVING_FILES[table]
    path = Path(directory) / name
    try:
        return pd.read_csv(path, dtype=dtypes)
    except FileNotFoundError:
        raise DataError(f"{table} table not found: {path}") from None
    except (pd.errors.ParserError, pd.errors.EmptyDataError, UnicodeDecodeError) as exc:
        raise DataError(f"{table} table {path} is not a readable CSV: {exc}") from None


def _describe(value: Any) -> str:
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k}={v}" for k, v in value.items()) + "}"
    return str(value)


def format_reports(reports: Iterable[TableReport], verbose: bool = False) -> str:
    """Return the failures (every expectation when ``verbose``), one line each, then the total.

    Each line: PASS/FAIL, table, expectation, column, unexpected count, examples. The last line
    is the total: tables, rows, expectations passed and failed.
    """
    reports = list(reports)
    results = [r for report in reports for r in report.results]
    failed = [r for r in results if not r.success]
    lines = [_result_line(r) for r in (results if verbose else failed)]
    failing_tables = [report.table for report in reports if not report.success]
    verdict = f"FAILED ({', '.join(failing_tables)})" if failing_tables else "all passed"
    lines.append(
        f"{len(reports)} tables, {sum(rep.rows for rep in reports)} rows, {len(results)} "
        f"expectations: {len(results) - len(failed)} passed, {len(failed)} failed; {verdict}"
    )
    return "\n".join(lines)


def _result_line(r: ExpectationResult) -> str:
    count = "-" if r.unexpected_count is None else r.unexpected_count
    line = (
        f"{'PASS' if r.success else 'FAIL'}  {r.table:<12} {r.expectation:<44} "
        f"{r.column or '-':<28} unexpected={count}"
    )
    if r.examples:
        line += "  examples: " + "; ".join(_describe(v) for v in r.examples)
    if r.error:
        line += f"  error: {r.error}"
    return line


def raise_on_failure(reports: Iterable[TableReport]) -> None:
    """Raise ``ValidationFailed`` naming every failing table and expectation.

    Raises:
        ValidationFailed: at least one expectation failed.

    """
    failed = [r for report in reports for r in report.results if not r.success]
    if not failed:
        return
    tables: dict[str, list[str]] = {}
    for r in failed:
        name = r.expectation if r.column is None else f"{r.expectation}({r.column})"
        if r.examples:
            name += f" e.g. {', '.join(repr(e) for e in r.examples[:2])}"
        tables.setdefault(r.table, []).append(name)
    detail = "; ".join(f"{table}: {', '.join(names)}" for table, names in tables.items())
    raise ValidationFailed(f"data validation failed, {len(failed)} expectation(s): {detail}")


def write_suites(directory: Path = EXPECTATIONS_DIR) -> list[Path]:
    """Rewrite ``<directory>/<table>.json`` from :func:`build_suites`; return the paths written."""
    directory.mkdir(parents=True, exist_ok=True)
    written = []
    for table, spec in build_suites().items():
        path = directory / f"{table}.json"
        path.write_text(json.dumps(suite_to_json(spec), indent=2) + "\n", encoding="utf-8")
        written.append(path)
    return written


def main() -> None:
    """Rewrite the committed suites (``python -m wattgpu.data.validation``)."""
    for path in write_suites():
        print(f"wrote {path}")


if __name__ == "__main__":
    main()
