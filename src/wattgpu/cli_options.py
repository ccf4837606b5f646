"""Options shared by several commands, so that a flag means the same everywhere."""

from __future__ import annotations

from typing import Any

import click


def alias_option(func: Any) -> Any:
    """``--alias``: the registry alias whose model version a command uses."""
    return click.option(
        "--alias",
        default="production",
        show_default=True,
        help="Registry alias of the model version(s) to use.",
    )(func)


def output_format_option(func: Any) -> Any:
    """``--format table|json|csv`` (parameter ``fmt``): for people, or every column for scripts."""
    return click.option(
        "--format",
        "fmt",
        type=click.Choice(["table", "json", "csv"]),
        default="table",
        show_default=True,
        help="table for people; json and csv carry every column, for scripts.",
    )(func)
