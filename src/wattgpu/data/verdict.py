"""What a validation of the data found, in words: read without importing Great Expectations.

A job validates its data on a worker process while it opens its stores (``pipeline``); the
answer crosses back pickled, so it is made of strings, and this module imports nothing that
takes seconds to load.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from wattgpu.errors import ValidationFailed


@dataclass(frozen=True)
class Verdict:
    """The outcome of validating the catalogues and the measurements.

    Attributes:
        ok: every expectation held.
        report: every expectation, one line each, then the total (``format_reports``).
        failures: the failing expectations only, then the total.
        error: ``ValidationFailed``'s message naming each failure; "" when ``ok``.

    """

    ok: bool
    report: str
    failures: str
    error: str


def check_files(
    gpus_csv: Path, llms_csv: Path, measurement_paths: tuple[Path, ...], docs_dir: Path | None
) -> Verdict:
    """``validation.validate_all`` of these files, as a ``Verdict`` (Data Docs in ``docs_dir``).

    Raises:
        DataError: a file is missing or unreadable (from the loaders).

    """
    from wattgpu.data import validation  # Great Expectations: seconds to import

    return of_reports(
        validation.validate_all(gpus_csv, llms_csv, measurement_paths, docs_dir=docs_dir)
    )


def of_reports(reports: Iterable[Any]) -> Verdict:
    """``validation.TableReport``s in words: the full report, the failures, the error."""
    from wattgpu.data import validation

    reports = list(reports)
    try:
        validation.raise_on_failure(reports)
        error = ""
    except ValidationFailed as failed:
        error = str(failed)
    return Verdict(
        ok=not error,
        report=validation.format_reports(reports, verbose=True),
        failures=validation.format_reports(reports),
        error=error,
    )
