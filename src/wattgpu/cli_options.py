"""What every command shares: the state the root group builds, and options that mean one thing.

A flag means the same in every command that has it (``--target``, ``--format``, ``--alias``), and
an option whose value is computed when it is not given defaults to ``None``. MLproject entry points
can only pass strings, so such options take ``''`` as "not given", and the yes/no options take
``true``/``false`` after the flag as well as the bare flag.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import click

from wattgpu.config import TARGET_PRIORS, Settings, target_prior
from wattgpu.data.measurements import SCENARIOS
from wattgpu.errors import ConfigError
from wattgpu.modeling.physical.targets import TARGETS

EVERY_TARGET = "both"
"""The ``--target`` value of a command that can act on every target at once."""
FORMATS = ("table", "json", "csv")


@dataclass(frozen=True)
class CliState:
    """What the root group builds once, at command start, for every command.

    Attributes:
        settings: where data, runs and studies live (``wattgpu.config.load_settings``).
        launcher_run_id: the run id ``mlflow run`` handed down, if it launched this command.

    """

    settings: Settings
    launcher_run_id: str | None = None


pass_state = click.make_pass_decorator(CliState)
"""Decorator passing the root group's ``CliState`` as a command's first argument."""


def _blank(value: Any, param: click.Parameter | None, ctx: click.Context | None) -> bool:
    """Whether ``value`` is blank, i.e. not given; a required option may not be blank."""
    if not (isinstance(value, str) and not value.strip()):
        return False
    if param is not None and param.required:
        raise click.MissingParameter(ctx=ctx, param=param)
    return True


class Blankable(click.ParamType):
    """A parameter type for which a blank value means "not given" (``None``).

    ``mlflow run`` passes every MLproject parameter, so an unset one arrives as ``''``.
    """

    def __init__(self, inner: click.ParamType) -> None:
        self.inner = inner
        self.name = inner.name

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        """``None`` for a blank string, else the inner type's conversion."""
        return None if _blank(value, param, ctx) else self.inner.convert(value, param, ctx)


class PriorChoice(click.ParamType):
    """A prior for every target (``simulated``) or per target (``ttft=simulated,itl=...``)."""

    name = "prior"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        """The value as given, once every target's prior it asks for is known."""
        try:
            for target in TARGET_PRIORS:
                target_prior(target, value)
        except ConfigError as error:
            self.fail(str(error), param, ctx)
        return value


class WholeNumber(click.IntRange):
    """A whole number, optionally bounded; ``''`` means not given.

    MLproject has no integer type, so entry points declare whole numbers as ``float``; this type
    refuses a fraction (``-P trials=2.5``) in one line instead of rounding it.
    """

    name = "integer"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        """``None`` for a blank string, else the bounded integer."""
        return None if _blank(value, param, ctx) else super().convert(value, param, ctx)

    def _describe_range(self) -> str:
        """The bounds for ``--help``; nothing for an unbounded number."""
        return "" if self.min is None and self.max is None else super()._describe_range()


def whole_number(minimum: int | None = None, maximum: int | None = None) -> click.ParamType:
    """A ``WholeNumber`` from ``minimum`` to ``maximum`` (each ``None``: unbounded)."""
    return WholeNumber(min=minimum, max=maximum)


def text_or_none() -> click.ParamType:
    """Free text where ``''`` means not given."""
    return Blankable(click.STRING)


def yes_no_option(name: str, *, default: bool, help: str) -> Callable[[Any], Any]:
    """``--NAME [true|false]``: the bare flag means true; the value form serves MLproject."""
    return click.option(
        name,
        type=click.BOOL,
        is_flag=False,
        flag_value=True,
        default=str(default).lower(),  # as MLproject spells it; click makes it a bool
        show_default=True,
        metavar="[true|false]",
        help=help,
    )


def target_option(
    *, required: bool = False, every: bool = False, help: str | None = None
) -> Callable[[Any], Any]:
    """``--target power|itl``: required, or ``power`` by default; ``every`` adds ``both``.

    A command that acts on one model defaults to ``power``; one that can act on every model
    (``predict``, ``models``) defaults to ``both``.
    """
    choices = [*TARGETS, EVERY_TARGET] if every else list(TARGETS)
    help = help or (
        "What to predict: power (W), inter-token latency itl (ms) or time to first token ttft (ms)."
    )
    if required:  # no default at all: click 8.5 takes an explicit None as a given value
        return click.option("--target", type=click.Choice(choices), required=True, help=help)
    default = EVERY_TARGET if every else TARGETS[0]
    return click.option(
        "--target", type=click.Choice(choices), default=default, show_default=True, help=help
    )


def scenario_option(func: Any) -> Any:
    """``--scenario offline|server`` (default ``server``): a batch job or a request stream."""
    return click.option(
        "--scenario",
        type=click.Choice(list(SCENARIOS)),
        default="server",
        show_default=True,
        help="offline: a batch job; server: a stream of requests.",
    )(func)


def serving_setup_options(func: Any) -> Any:
    """``--client``, ``--length-spread``, and the engine knobs (``--max-num-seqs`` ...).

    The serving set-up beside the load: who sends the requests (a client of
    ``data/clients.csv``; without one, the load's own: ``--concurrency`` a closed loop, ``--rate``
    Poisson arrivals, ``--batch-size`` one batch), how its lengths spread around the query's
    means, and the engine's knobs. They act on the
    simulated serving loop behind the ITL and TTFT tails (p90, p99); the library checks each
    (``modeling.answering.queries``, ``modeling.serving.checks``).
    """
    options = [
        click.option(
            "--client",
            default=None,
            help="Who sends the requests: a client of clients.csv (closed, poisson, batch, "
            "llm-pilot, aiconfigurator, ...). Default: the load's own (--concurrency: closed, "
            "--rate: poisson, --batch-size or offline: batch).",
        ),
        click.option(
            "--length-spread",
            type=float,
            default=None,
            help="How requests' lengths spread around --input-tokens / --output-tokens: the "
            "sigma of a lognormal length's log, 0 to 3 (0: every request alike). Default: the "
            "client's (closed, poisson, batch: 0.5).",
        ),
        click.option(
            "--max-num-seqs",
            type=int,
            default=None,
            help="Engine knob: the most requests running at once (default: the engine's).",
        ),
        click.option(
            "--max-batched-tokens",
            type=int,
            default=None,
            help="Engine knob: the most tokens in one step (default: the engine's).",
        ),
        click.option(
            "--chunked-prefill",
            type=click.Choice(["on", "off"]),
            default=None,
            help="Engine knob: split long prompts over steps (default: the engine's).",
        ),
    ]
    for option in reversed(options):
        func = option(func)
    return func


def engine_options(func: Any) -> Any:
    """``--engine``, ``--engine-version``, ``--engine-year``, ``--dtype``: what serves, and how.

    The engine a user runs and the format of the weights it serves, as ``predict`` and
    ``recommend`` both take them; the library checks each (``queries.checked_engine``).
    """
    options = [
        click.option(
            "--engine",
            default=None,
            help="Serving engine: vllm, sglang, trtllm, tgi, ... (default vllm).",
        ),
        click.option(
            "--engine-version",
            default=None,
            help="Version of the engine you run, e.g. 0.19.0 (default: today's release).",
        ),
        click.option(
            "--engine-year",
            type=int,
            default=None,
            help="Release year of the engine version you run, instead of --engine-version.",
        ),
        click.option(
            "--dtype",
            default=None,
            help="Weight format: bfloat16, fp8, int8, int4 (AWQ/GPTQ), mxfp4, ... (default: the "
            "checkpoint's own where it ships below 16 bits, else bfloat16).",
        ),
    ]
    for option in reversed(options):
        func = option(func)
    return func


def _drop_blank(_ctx: click.Context, _param: click.Parameter, value: tuple[str, ...]) -> tuple:
    """The paths given, without blank ones (MLproject passes ``--data ''`` for no ``--data``)."""
    return tuple(Path(v) for v in value if str(v).strip())


def data_option(func: Any) -> Any:
    """``--data PATH`` (repeatable): measurement files or folders; default: the shipped ones."""
    return click.option(
        "--data",
        "data",
        multiple=True,
        type=click.Path(),
        callback=_drop_blank,
        help="Measurement CSV file or folder of them (repeatable). "
        "Default: the real measurements shipped with wattgpu (<data dir>/measurements).",
    )(func)


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
        type=click.Choice(list(FORMATS)),
        default="table",
        show_default=True,
        help="table for people; json and csv carry every column, for scripts.",
    )(func)


def run_id_option(help: str) -> Callable[[Any], Any]:
    """``--run-id ID``: a tuning run; not given (``None``) means the latest finished one."""
    return click.option("--run-id", type=text_or_none(), default=None, help=help)


def quiet_mlflow() -> None:
    """Keep MLflow's progress bars, info and warning lines out of a command's answer."""
    import logging
    import warnings

    os.environ["MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR"] = "false"
    logging.getLogger("mlflow").setLevel(logging.ERROR)
    # It logs a database error with its traceback, then raises it as an MlflowException, which
    # the CLI shows in one line (or a promotion waits out, for "database is locked").
    logging.getLogger("mlflow.store.db.utils").setLevel(logging.CRITICAL)
    warnings.filterwarnings("ignore", module="mlflow")
