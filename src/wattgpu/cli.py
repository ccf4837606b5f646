"""The ``wattgpu`` command line: a thin shell over the library.

Every command builds the settings once, calls one library function and turns a ``WattgpuError``
into one line on stderr and exit code 1. Usage mistakes exit 2 (click's convention).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import click

from wattgpu.config import DEFAULT_OPTUNA_STORAGE, Settings, load_settings
from wattgpu.errors import WattgpuError

TARGET_CHOICE = click.Choice(["power", "itl"])


class WattgpuGroup(click.Group):
    """A group that reports library errors as one line instead of a traceback."""

    def invoke(self, ctx: click.Context) -> Any:
        """Run the command; a ``WattgpuError`` becomes a one-line ``ClickException``."""
        try:
            return super().invoke(ctx)
        except WattgpuError as exc:
            raise click.ClickException(str(exc)) from None


def data_option(func: Any) -> Any:
    """``--data PATH`` (repeatable): measurement files or folders; default ``data/measurements``."""
    return click.option(
        "--data",
        "data",
        multiple=True,
        type=click.Path(path_type=Path),
        help="Measurement CSV file or folder of them (repeatable). Default: data/measurements.",
    )(func)


def _settings(ctx: click.Context) -> Settings:
    return ctx.obj["settings"]


@click.group(cls=WattgpuGroup)
@click.version_option(package_name="wattgpu")
@click.option(
    "--data-dir",
    type=click.Path(path_type=Path),
    default=None,
    help="Folder with gpus.csv, llms.csv and measurements/ (default: $WATTGPU_DATA_DIR or ./data).",
)
@click.pass_context
def cli(ctx: click.Context, data_dir: Path | None) -> None:
    """WattGPU: predict GPU power and inter-token latency of serving open LLMs."""
    settings = load_settings()
    if data_dir is not None:
        settings = Settings(data_dir, settings.tracking_uri, settings.optuna_storage)
    # `mlflow run` hands its own run id down; our jobs log to their own experiments and tag it.
    launcher = os.environ.pop("MLFLOW_RUN_ID", None)
    ctx.obj = {"settings": settings, "launcher_run_id": launcher}


@cli.command()
@data_option
@click.option(
    "--docs-dir",
    type=click.Path(path_type=Path),
    default=Path("data_docs"),
    show_default=True,
    help="Where Great Expectations writes its Data Docs HTML.",
)
@click.pass_context
def validate(ctx: click.Context, data: tuple[Path, ...], docs_dir: Path) -> None:
    """Validate the GPU and LLM catalogues and the measurements with Great Expectations."""
    from wattgpu.lifecycle import pipeline

    settings = _settings(ctx)
    loaded = pipeline.load_data(settings, list(data) or None)
    ok, report, _ = pipeline.validate(settings, loaded, docs_dir)
    click.echo(report)
    click.echo(f"Data Docs: {docs_dir}")
    if not ok:
        raise click.ClickException("validation failed (see the FAIL lines above)")


def _tune_options(func: Any) -> Any:
    options = [
        click.option(
            "--trials",
            type=click.IntRange(min=1),
            default=10,
            show_default=True,
            help="Optuna trials in the study (a total: a resumed study runs only the missing).",
        ),
        click.option(
            "--timeout",
            type=click.FloatRange(min=0),
            default=0.0,
            show_default=True,
            help="Stop the study after this many seconds (0: no limit).",
        ),
        click.option(
            "--storage",
            default=DEFAULT_OPTUNA_STORAGE,
            show_default=True,
            help="Optuna storage URL (SQLAlchemy), e.g. postgresql+psycopg2://user@host/db.",
        ),
        click.option(
            "--study", default="", help="Optuna study name (default: wattgpu-TARGET-DATAHASH)."
        ),
        click.option(
            "--seed",
            type=int,
            default=0,
            show_default=True,
            help="Seed of the sampler, the splits and CatBoost.",
        ),
        data_option,
    ]
    for option in reversed(options):
        func = option(func)
    return func


def _run_tune(
    ctx: click.Context,
    target: str,
    trials: int,
    timeout: float,
    storage: str,
    study: str,
    seed: int,
    data: tuple[Path, ...],
) -> None:
    from wattgpu.lifecycle import pipeline
    from wattgpu.modeling.evaluation import to_markdown

    result = pipeline.tune(
        _settings(ctx),
        target,
        data_paths=list(data) or None,
        trials=trials,
        timeout=timeout or None,
        storage=storage,
        study_name=study or None,
        seed=seed,
        launcher_run_id=ctx.obj["launcher_run_id"],
    )
    click.echo(
        f"\n{target}: best LOGO MdAPE {result.best_value:.2f} % on {result.n_rows} rows; "
        f"run {result.run_id}"
    )
    click.echo(to_markdown(result.table))


@cli.command()
@click.option(
    "--target", type=TARGET_CHOICE, required=True, help="What to predict: power (W) or itl (ms)."
)
@_tune_options
@click.pass_context
def tune(
    ctx: click.Context,
    target: str,
    trials: int,
    timeout: float,
    storage: str,
    study: str,
    seed: int,
    data: tuple[Path, ...],
) -> None:
    """Tune a CatBoost model with Optuna (objective: leave-one-GPU-out MdAPE), tracked in MLflow."""
    _run_tune(ctx, target, trials, timeout, storage, study, seed, data)


@cli.command(name="main")
@_tune_options
@click.pass_context
def main_job(
    ctx: click.Context,
    trials: int,
    timeout: float,
    storage: str,
    study: str,
    seed: int,
    data: tuple[Path, ...],
) -> None:
    """The main job: validate, tune power, tune ITL, log everything."""
    for target in ("power", "itl"):
        _run_tune(
            ctx, target, trials, timeout, storage, f"{study}-{target}" if study else "", seed, data
        )


@cli.command()
@click.option(
    "--run-id",
    default=None,
    help="A tuning run's id (default: the latest finished one of --target).",
)
@click.option(
    "--target",
    type=TARGET_CHOICE,
    default="power",
    show_default=True,
    help="Target whose latest run to show when no --run-id is given.",
)
@click.option(
    "--format", "fmt", type=click.Choice(["markdown", "csv"]), default="markdown", show_default=True
)
@click.pass_context
def evaluate(ctx: click.Context, run_id: str | None, target: str, fmt: str) -> None:
    """Print the evaluation table (model and baselines, CV/LOGO/LOLO x scenario) of a tuning run."""
    from wattgpu.lifecycle import tracking
    from wattgpu.modeling.evaluation import to_markdown

    tracking.configure(_settings(ctx).tracking_uri)
    run_id = run_id or tracking.latest_parent_run(target)
    table = tracking.load_evaluation(run_id)
    click.echo(f"run {run_id}")
    click.echo(table.to_csv(index=False) if fmt == "csv" else to_markdown(table))


@cli.group(cls=WattgpuGroup)
def data() -> None:
    """Data sets: generate the analytical one."""


@data.command()
@click.option(
    "--output",
    type=click.Path(path_type=Path),
    default=Path("data/measurements/generated.csv"),
    show_default=True,
    help="CSV file to write.",
)
@click.option(
    "--seed", type=int, default=0, show_default=True, help="Seed of the measurement noise."
)
@click.pass_context
def simulate(ctx: click.Context, output: Path, seed: int) -> None:
    """Generate a measurement set from the analytical model (marked as generated in `source`)."""
    from wattgpu.data.catalog import Catalog
    from wattgpu.data.simulate import write_simulated

    settings = _settings(ctx)
    catalog = Catalog.load(settings.gpus_csv, settings.llms_csv)
    output.parent.mkdir(parents=True, exist_ok=True)
    rows = write_simulated(output, catalog, seed=seed)
    click.echo(f"wrote {rows} generated rows to {output}")


def main() -> None:
    """Console-script entry point."""
    cli(prog_name="wattgpu")
