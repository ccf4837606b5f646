"""The project's error hierarchy.

Every error a user can cause is a ``WattgpuError``: the CLI prints its message as one line and
exits non-zero; the model server answers it with HTTP 400. Messages name the field or file, say
what is allowed, and end with the bad value; a long list of what is allowed is shortened by
``listing``, never cut.
"""

from collections.abc import Iterable

LISTED = 15
"""The most items a message lists; the rest are counted ("and 4 more")."""


def listing(items: Iterable[object], limit: int = LISTED) -> str:
    """``items`` joined by commas, the ones past ``limit`` counted: ``a, b and 2 more``."""
    shown = [str(item) for item in items]
    more = len(shown) - limit
    if more <= 0:
        return ", ".join(shown)
    return f"{', '.join(shown[:limit])} and {more} more"


class WattgpuError(Exception):
    """Base class of every error WattGPU raises on purpose."""


class ConfigError(WattgpuError):
    """A setting, option or storage URL is wrong."""


class DataError(WattgpuError):
    """A data file is missing, unreadable or has the wrong shape."""


class UnknownNameError(DataError):
    """A GPU or LLM name resolves to no single catalogue entry.

    Attributes:
        kind: ``GPU`` or ``LLM``.
        name: the name as given.
        suggestions: the variants it could mean, or the closest names.

    """

    def __init__(self, kind: str, name: str, problem: str, suggestions: tuple[str, ...]) -> None:
        super().__init__(f"{kind} {name!r} {problem}")
        self.kind = kind
        self.name = name
        self.suggestions = list(suggestions)


class ValidationFailed(DataError):
    """Great Expectations found data that breaks an expectation."""


class ModelNotFound(WattgpuError):
    """A run, model or model version that was asked for does not exist."""


class QueryError(WattgpuError):
    """A prediction query (a CLI option, a CSV row or a REST row) is invalid.

    Attributes:
        field: the column or option at fault.
        row: the 0-based row of the batch, or ``None`` when the whole query is at fault.

    """

    def __init__(self, message: str, field: str | None = None, row: int | None = None) -> None:
        where = f"row {row}: " if row is not None else ""
        super().__init__(f"{where}{message}")
        self.field = field
        self.row = row


class StudyComplete(WattgpuError):
    """A tuning job found its study already holding the trials asked for: nothing to run."""
