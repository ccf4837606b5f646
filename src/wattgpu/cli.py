"""The ``wattgpu`` command line: a thin shell over the library.

The root group builds the settings once (``CliState``) and turns every error a user can cause
into one line on stderr and exit code 1, for every command below it; usage mistakes exit 2
(click's convention). Each command calls one library function.
"""

from __future__ import annotations

import faulthandler
import os
import re
import sys
from pathlib import Path
from typing import Any

import click

from wattgpu.cli_llm import asked_llm, model_config_option
from wattgpu.cli_options import (
    EVERY_TARGET,
    Blankable,
    CliState,
    PriorChoice,
    alias_option,
    data_option,
    engine_options,
    output_format_option,
    pass_state,
    quiet_mlflow,
    run_id_option,
    scenario_option,
    serving_setup_options,
    target_option,
    text_or_none,
    whole_number,
    yes_no_option,
)
from wattgpu.config import MLFLOW_JOB_RUNNERS, PRIORS, RECIPES, TARGET_PRIORS, load_settings
from wattgpu.errors import QueryError, WattgpuError, listing
from wattgpu.modeling.physical.targets import TARGETS


class WattgpuGroup(click.Group):
    """A group that reports errors a user can cause as one line instead of a traceback.

    The root group's handler is the CLI's only one and covers every subcommand, nested groups
    included: library errors, file-system errors (an output into a missing folder, onto a
    folder, to an unwritable path) and errors MLflow raises about a store or a server.
    """

    def invoke(self, ctx: click.Context) -> Any:
        """Run the command; a user's error becomes a one-line ``ClickException`` (exit 1)."""
        try:
            return super().invoke(ctx)
        except WattgpuError as exc:
            raise click.ClickException(str(exc)) from None
        except OSError as exc:
            raise click.ClickException(_os_error_line(exc)) from None
        except Exception as exc:
            # MLflow is imported lazily by the commands; only its errors are the user's to fix
            mlflow_errors = sys.modules.get("mlflow.exceptions")
            if mlflow_errors and isinstance(exc, mlflow_errors.MlflowException):
                raise click.ClickException(_first_line(exc.message)) from None
            raise


def _os_error_line(exc: OSError) -> str:
    """``PATH: reason`` for a file-system error (pandas raises some without a file name)."""
    if isinstance(exc, FileExistsError):  # mkdir(exist_ok=True) on a path that is a file
        return f"cannot create folder {exc.filename}: a file of that name is in the way"
    if exc.filename is not None:
        return f"cannot use {exc.filename}: {exc.strerror or type(exc).__name__}"
    return _first_line(str(exc) or type(exc).__name__)


def _first_line(text: str) -> str:
    return text.strip().splitlines()[0] if text.strip() else text


@click.group(cls=WattgpuGroup)
@click.version_option(package_name="wattgpu")
@click.option(
    "--data-dir",
    type=click.Path(path_type=Path),
    default=None,
    help="Folder with gpus.csv, llms.csv and measurements/ "
    "(default: $WATTGPU_DATA_DIR, else the data shipped with wattgpu).",
)
@click.pass_context
def cli(ctx: click.Context, data_dir: Path | None) -> None:
    """WattGPU: predict GPU power and inter-token latency of serving open LLMs."""
    # `mlflow run` hands its own run id down; our jobs log to their own experiments and tag it.
    launcher = os.environ.pop("MLFLOW_RUN_ID", None)
    ctx.obj = CliState(load_settings(data_dir=data_dir), launcher)


@cli.command()
@data_option
@click.option(
    "--docs-dir",
    type=click.Path(path_type=Path),
    default=Path("data_docs"),
    show_default=True,
    help="Where Great Expectations writes its Data Docs HTML.",
)
@yes_no_option("--verbose", default=False, help="Print every expectation, not only the failures.")
@pass_state
def validate(state: CliState, data: tuple[Path, ...], docs_dir: Path, verbose: bool) -> None:
    """Validate the GPU and LLM catalogues and the measurements with Great Expectations."""
    from wattgpu.lifecycle import pipeline

    settings = state.settings
    loaded = pipeline.load_data(settings, list(data) or None)
    verdict = pipeline.validate(settings, loaded, docs_dir).verdict
    click.echo(verdict.report if verbose else verdict.failures)
    click.echo(f"Data Docs: {docs_dir}")
    if not verdict.ok:
        raise click.ClickException("validation failed (see the FAIL lines above)")


def _tune_options(func: Any) -> Any:
    """The options ``tune`` and ``main`` share: the recipe, the study and the data."""
    options = [
        click.option(
            "--recipe",
            type=Blankable(click.Choice(RECIPES)),
            metavar=f"[{'|'.join(RECIPES)}]",
            default=None,
            help="How the models are built: full (the served recipe) or fast (few iterations "
            "and grouped folds, for tests and quick looks) (default: $WATTGPU_RECIPE, else "
            "full).",
        ),
        click.option(
            "--prior",
            type=Blankable(PriorChoice()),
            metavar=f"[{'|'.join(PRIORS)}|TARGET=PRIOR,...]",
            default=None,
            help="What the models learn a correction to: closed-form (the analytical serving "
            "regimes) or simulated (each row's serving loop simulated, slower; docs/model.md "
            "compares them), for every target or per target (ttft=simulated) (default: each "
            "target's own: "
            + ", ".join(f"{target} {prior}" for target, prior in TARGET_PRIORS.items())
            + ").",
        ),
        click.option(
            "--trials",
            type=whole_number(minimum=1),
            default=10,
            show_default=True,
            help="Optuna trials in the study (a total: a resumed study runs only the missing).",
        ),
        click.option(
            "--time-budget",
            type=click.FloatRange(min=0),
            default=0.0,
            show_default=True,
            help="Time budget of the study, seconds: no trial starts after it (0: no limit).",
        ),
        click.option(
            "--storage",
            type=text_or_none(),
            default=None,
            help="Optuna storage URL (SQLAlchemy), e.g. postgresql+psycopg2://user@host/db "
            "(default: $WATTGPU_OPTUNA_STORAGE, else optuna.db in $WATTGPU_HOME, ~/.wattgpu).",
        ),
        click.option(
            "--study",
            type=text_or_none(),
            default=None,
            help="Optuna study name (default: wattgpu-TARGET-DATAHASH; the main job adds "
            "-power and -itl to a name given).",
        ),
        click.option(
            "--seed",
            type=whole_number(),
            default=0,
            show_default=True,
            help="Seed of the sampler, the splits and CatBoost.",
        ),
        data_option,
    ]
    for option in reversed(options):
        func = option(func)
    return func


@cli.command()
@target_option(required=True)
@_tune_options
@pass_state
def tune(
    state: CliState,
    target: str,
    recipe: str | None,
    prior: str | None,
    trials: int,
    time_budget: float,
    storage: str | None,
    study: str | None,
    seed: int,
    data: tuple[Path, ...],
) -> None:
    """Tune a CatBoost model with Optuna (objective: leave-one-GPU-out MdAPE), tracked in MLflow."""
    from wattgpu.errors import StudyComplete
    from wattgpu.lifecycle import pipeline

    try:
        result = pipeline.tune(
            state.settings,
            target,
            recipe=recipe,
            prior=prior,
            data_paths=list(data) or None,
            trials=trials,
            timeout=time_budget or None,
            storage=storage,
            study_name=study,
            seed=seed,
            launcher_run_id=state.launcher_run_id,
            notify=lambda line: click.echo(line, err=True),
        )
    except StudyComplete as done:
        click.echo(str(done))  # not an error: the study is complete
        return
    click.echo(pipeline.summary(target, result))


@cli.command(name="main")
@_tune_options
@yes_no_option(
    "--register", default=True, help="Register the tuned models (alias challenger); false: don't."
)
@yes_no_option(
    "--verbose",
    default=False,
    help="Also print each evaluation table, MLflow's log lines and progress bars.",
)
@pass_state
def main_job(
    state: CliState,
    recipe: str | None,
    prior: str | None,
    trials: int,
    time_budget: float,
    storage: str | None,
    study: str | None,
    seed: int,
    data: tuple[Path, ...],
    register: bool,
    verbose: bool,
) -> None:
    """The main job: validate, tune power, ITL and TTFT, log everything, register the models.

    A target with no production version yet gets its new version promoted to production. TTFT
    is skipped, with a notice, when the data holds no measured ``ttft_s``. It prints one line
    per step and target, and a progress bar per target's study on a terminal.
    """
    from wattgpu.lifecycle import pipeline

    if not verbose:
        quiet_mlflow()  # after MLflow's import (by pipeline), which sets its loggers' levels
    pipeline.main_job(
        state.settings,
        recipe=recipe,
        prior=prior,
        data_paths=list(data) or None,
        trials=trials,
        timeout=time_budget or None,
        storage=storage,
        study_name=study,
        seed=seed,
        register=register,
        launcher_run_id=state.launcher_run_id,
        notify=click.echo,
        verbose=verbose,
    )


@cli.command()
@run_id_option("A tuning run's id (default: the latest finished one of --target).")
@target_option(help="Target whose latest run (or --version) to show when no --run-id is given.")
@click.option(
    "--version",
    "version",
    type=whole_number(minimum=1),
    default=None,
    help="A registered model version of --target: show the run it came from.",
)
@yes_no_option(
    "--intervals",
    default=False,
    help="Show the 90 % intervals' coverage and width on each held-out GPU instead.",
)
@output_format_option
@pass_state
def evaluate(
    state: CliState,
    run_id: str | None,
    target: str,
    version: int | None,
    intervals: bool,
    fmt: str,
) -> None:
    """Print the evaluation table (model and baselines, CV/LOGO/LOLO x scenario) of a tuning run.

    With ``--intervals true``: the prediction intervals' coverage and median relative width on
    each GPU when it was held out (leave-one-GPU-out), per scenario. The table format is
    Markdown; with json or csv the run line goes to stderr.
    """
    from wattgpu.lifecycle import registry, tracking
    from wattgpu.modeling.learning.evaluation import intervals_markdown, to_markdown

    quiet_mlflow()
    tracking.configure(state.settings.tracking_uri, must_exist=True)
    if version is not None:
        run_id = registry.version_run_id(target, version)
    run_id = run_id or tracking.latest_parent_run(target)
    if intervals:
        table = tracking.load_frame(run_id, tracking.INTERVAL_CELLS_CSV)
        as_table = intervals_markdown
    else:
        table, as_table = tracking.load_evaluation(run_id), to_markdown
    click.echo(f"run {run_id}", err=fmt != "table")
    _echo_frame(table, fmt, as_table)


def _echo_frame(table: Any, fmt: str, as_table: Any) -> None:
    """Print a data frame as ``--format`` asks: ``as_table(table)`` for people, or json/csv."""
    if fmt == "json":
        click.echo(table.to_json(orient="records", indent=2))
    elif fmt == "csv":
        click.echo(table.to_csv(index=False), nl=False)
    else:
        click.echo(as_table(table))


@cli.command()
@target_option(required=True, help="Which model to register.")
@run_id_option("Tuning run whose model to register (default: the latest finished one).")
@pass_state
def register(state: CliState, target: str, run_id: str | None) -> None:
    """Register a tuning run's model as wattgpu-TARGET, alias challenger."""
    from wattgpu.lifecycle import promotion_lock, registry, tracking

    quiet_mlflow()
    tracking.configure(state.settings.tracking_uri, must_exist=True)
    promotion_lock.configure(state.settings.promotion_lease_s)
    version = registry.register(target, run_id)
    click.echo(f"registered {registry.model_name(target)} v{version} (alias challenger)")


@cli.command()
@target_option(required=True, help="Which model to promote.")
@click.option(
    "--version",
    "version",
    type=whole_number(minimum=1),
    required=True,
    help="Model version to promote.",
)
@click.option(
    "--to",
    "to",
    type=click.Choice(["staging", "production"]),
    required=True,
    help="Alias (and stage) to move.",
)
@yes_no_option("--force", default=False, help="Promote even when the quality gate refuses.")
@pass_state
def promote(state: CliState, target: str, version: int, to: str, force: bool) -> None:
    """Promote a model version, behind the LOGO-MdAPE quality gate."""
    from wattgpu.lifecycle import promotion_lock, registry, tracking

    quiet_mlflow()
    tracking.configure(state.settings.tracking_uri, must_exist=True)
    promotion_lock.configure(state.settings.promotion_lease_s)
    click.echo(registry.promote(target, version, to, force=force).line())


@cli.command(name="models")
@target_option(every=True, help="Which models to list.")
@output_format_option
@pass_state
def list_models(state: CliState, target: str, fmt: str) -> None:
    """List registered model versions with aliases, stage, creation time and key metrics."""
    import pandas as pd

    from wattgpu.lifecycle import registry, tracking

    quiet_mlflow()
    tracking.configure(state.settings.tracking_uri, must_exist=True)
    table = pd.concat([registry.list_versions(t) for t in _targets(target)], ignore_index=True)
    if table.empty and fmt == "table":
        click.echo("no registered models; run `wattgpu main` or `wattgpu register --target power`")
        return
    _echo_frame(table, fmt, lambda t: t.to_string(index=False, float_format=lambda v: f"{v:.2f}"))


def _targets(target: str) -> tuple[str, ...]:
    """The targets a ``--target`` value stands for (``both``: every one)."""
    return tuple(TARGETS) if target == EVERY_TARGET else (target,)


@cli.command()
@target_option(help="Which model to serve.")
@alias_option
@click.option(
    "--port", type=click.IntRange(1, 65535), default=5001, show_default=True, help="TCP port."
)
@click.option(
    "--host", default="127.0.0.1", show_default=True, help="Address to listen on (0.0.0.0: all)."
)
@click.option(
    "--workers", type=click.IntRange(min=1), default=1, show_default=True, help="uvicorn workers."
)
@click.option(
    "--max-body-mb",
    type=click.FloatRange(min=0.001),
    default=32.0,
    show_default=True,
    help="Refuse request bodies larger than this (HTTP 400).",
)
@pass_state
def serve(
    state: CliState,
    target: str,
    alias: str,
    port: int,
    host: str,
    workers: int,
    max_body_mb: float,
) -> None:
    """Serve a registered model: MLflow's REST scoring app (POST /invocations) behind a guard.

    The guard answers what MLflow's server does not: a missing or unsupported Content-Type
    (415), an oversized body or deeply nested JSON (400), and turns every error into a short
    JSON body without stack traces.
    """
    import mlflow

    from wattgpu.lifecycle import registry, serving, tracking

    settings = state.settings
    tracking.configure(settings.tracking_uri, must_exist=True)
    uri = registry.model_uri(target, alias)
    local = mlflow.artifacts.download_artifacts(artifact_uri=uri)
    os.environ["MLFLOW_TRACKING_URI"] = settings.tracking_uri
    os.environ[serving.ENV_MODEL_PATH] = local
    os.environ[serving.ENV_MAX_BODY_BYTES] = str(int(max_body_mb * 1024 * 1024))
    click.echo(f"serving {uri} on http://{host}:{port}/invocations", err=True)
    command = [sys.executable, "-m", "uvicorn", "--factory", "wattgpu.lifecycle.serving:create_app"]
    command += ["--host", host, "--port", str(port), "--workers", str(workers)]
    os.execv(sys.executable, command)


@cli.command()
@click.option(
    "--port", type=click.IntRange(1, 65535), default=5000, show_default=True, help="TCP port."
)
@click.option(
    "--host", default="127.0.0.1", show_default=True, help="Address to listen on (0.0.0.0: all)."
)
@yes_no_option("--print-only", default=False, help="Print where the stores are; start nothing.")
@pass_state
def ui(state: CliState, port: int, host: str, print_only: bool) -> None:
    """Open MLflow's UI on the store the other commands use (runs, models, evaluations).

    The stores are ``mlflow.db`` (with ``mlruns/``) and ``optuna.db`` in $WATTGPU_HOME
    (~/.wattgpu) unless MLFLOW_TRACKING_URI / WATTGPU_OPTUNA_STORAGE say otherwise; the
    command prints them as variables, so that ``export $(wattgpu ui --print-only true)`` points
    ``mlflow run`` and ``mlflow`` itself at the same stores.
    """
    settings = state.settings
    click.echo(f"MLFLOW_TRACKING_URI={settings.tracking_uri}")
    click.echo(f"WATTGPU_OPTUNA_STORAGE={settings.optuna_storage}")
    if print_only:
        return
    settings.home.mkdir(parents=True, exist_ok=True)
    os.chdir(settings.home)  # anything the UI server writes of its own lands in the home
    click.echo(f"MLflow UI on http://{host}:{port}", err=True)
    os.environ.setdefault(MLFLOW_JOB_RUNNERS, "false")  # the UI's server, without job runners
    mlflow_cli = [sys.executable, "-m", "mlflow", "ui", "--host", host, "--port", str(port)]
    os.execv(sys.executable, [*mlflow_cli, "--backend-store-uri", settings.tracking_uri])


@cli.command()
@click.option("--gpu", help="GPU name or alias (e.g. 'NVIDIA H100 PCIe').")
@click.option(
    "--model",
    "llm",
    help="LLM id (e.g. meta-llama/Llama-3.1-8B-Instruct); one the catalogue lacks is read "
    "from its config.json on the Hugging Face Hub.",
)
@model_config_option
@scenario_option
@click.option("--rate", type=float, default=None, help="Server request rate, requests/s.")
@click.option(
    "--concurrency",
    type=int,
    default=None,
    help="Server load as concurrent users (a closed loop), instead of --rate.",
)
@click.option(
    "--batch-size",
    type=int,
    default=None,
    help="Offline batch size (default: the engine's choice).",
)
@serving_setup_options
@click.option("--input-tokens", type=int, default=None, help="Mean prompt length (default 512).")
@click.option("--output-tokens", type=int, default=None, help="Mean output length (default 256).")
@engine_options
@click.option(
    "--num-gpus", type=int, default=None, help="GPUs the model is sharded over (default 1)."
)
@click.option(
    "--input",
    "input_csv",
    type=click.Path(path_type=Path),
    default=None,
    help="CSV of query rows (the REST columns) instead of the options above.",
)
@click.option(
    "--output",
    type=click.Path(path_type=Path),
    default=None,
    help="Write the predictions to this CSV.",
)
@target_option(every=True, help="Which model(s) to ask.")
@alias_option
@click.option(
    "--url", default=None, help="Ask a running model server instead (needs one --target)."
)
@output_format_option
@pass_state
def predict(
    state: CliState,
    input_csv: Path | None,
    output: Path | None,
    target: str,
    alias: str,
    url: str | None,
    fmt: str,
    **query: Any,
) -> None:
    """Predict power (W), ITL (ms) and TTFT (ms) for one query or a CSV of queries."""
    from wattgpu.cli_render import render_answers
    from wattgpu.lifecycle import client as predict_client

    if input_csv is not None:
        if query["model_config"] is not None:
            raise click.UsageError(
                "--model-config describes the LLM of --model; an --input file gives each row's "
                "config.json text in its model_config column"
            )
        queries = predict_client.read_queries(input_csv)
    elif not query["gpu"] or not (query["llm"] or query["model_config"]):
        raise click.UsageError("give --gpu and --model (or --model-config), or --input QUERIES.csv")
    else:
        _check_format(query["dtype"])
        asked = asked_llm(state.settings, query["llm"], query["model_config"])
        queries = _query_from_options(query | {"llm": asked.name, "model_config": asked.config})
    if url and target == EVERY_TARGET:
        raise click.UsageError("--url serves one model: give one --target (power, itl or ttft)")
    quiet_mlflow()
    try:
        answers = predict_client.ask_models(
            state.settings, queries, _targets(target), alias=alias, url=url
        )
    except QueryError as exc:
        if input_csv is not None:
            raise
        # a query made of options: name the options, not the REST columns behind them
        raise QueryError(_in_option_names(str(exc)), exc.field) from None
    if output is not None:
        answers.to_csv(output, index=False)
        click.echo(f"wrote {len(answers)} predictions to {output}")
        return
    _echo_frame(answers, fmt, lambda frame: render_answers(frame, queries=queries))


def _check_format(dtype: str | None) -> None:
    """Refuse a ``--dtype`` the project does not know before any model is loaded."""
    from wattgpu.data.formats import KNOWN_FORMATS, is_known_format

    if dtype is not None and not is_known_format(dtype):
        raise QueryError(f"--dtype must be one of {listing(KNOWN_FORMATS)}; got {dtype!r}", "dtype")


def _query_from_options(options: dict[str, Any]) -> Any:
    """The one-row query frame (REST columns) that ``predict``'s options describe."""
    import pandas as pd

    row = {"gpu": options["gpu"], "model": options["llm"], "scenario": options["scenario"]}
    row |= {"request_rate_rps": options["rate"], "concurrency": options["concurrency"]}
    row |= {k: options[k] for k in ("batch_size", "input_tokens", "output_tokens", "engine")}
    row |= {k: options[k] for k in ("engine_version", "engine_year", "num_gpus", "dtype")}
    row |= {k: options.get(k) for k in ("client", "length_spread")}
    row |= {k: options.get(k) for k in ("max_num_seqs", "max_batched_tokens")}
    row |= {"chunked_prefill": options.get("chunked_prefill")}  # on / off, as typed
    row |= {"model_config": options.get("model_config")}  # the config's text, or None
    return pd.DataFrame([row]).dropna(axis=1)


# The REST column behind each option of `wattgpu predict`.
PREDICT_OPTIONS = {
    "gpu": "--gpu",
    "model": "--model",
    "scenario": "--scenario",
    "request_rate_rps": "--rate",
    "concurrency": "--concurrency",
    "batch_size": "--batch-size",
    "input_tokens": "--input-tokens",
    "output_tokens": "--output-tokens",
    "engine_year": "--engine-year",
    "engine_version": "--engine-version",
    "engine": "--engine",
    "num_gpus": "--num-gpus",
    "dtype": "--dtype",
    "model_config": "--model-config",
    "client": "--client",
    "length_spread": "--length-spread",
    "max_num_seqs": "--max-num-seqs",
    "max_batched_tokens": "--max-batched-tokens",
    "chunked_prefill": "--chunked-prefill",
}
_COLUMN_NAMES = re.compile(r"\b(" + "|".join(PREDICT_OPTIONS) + r")\b")


def _in_option_names(message: str) -> str:
    """A query error about the one query the options made, in the options' names."""
    message = re.sub(r"^row 0: ", "", message)
    return _COLUMN_NAMES.sub(lambda match: PREDICT_OPTIONS[match.group(1)], message)


@cli.group()
def data() -> None:
    """Data sets: generate the analytical one, import and fetch public ones."""


@data.command()
@click.option(
    "--output",
    type=click.Path(path_type=Path),
    default=Path("data/generated/generated.csv"),
    show_default=True,
    help="CSV file to write.",
)
@click.option(
    "--seed", type=int, default=0, show_default=True, help="Seed of the measurement noise."
)
@pass_state
def synthesize(state: CliState, output: Path, seed: int) -> None:
    """Generate a measurement set from the analytical model (marked as generated in `source`)."""
    from wattgpu.data.catalog import Catalog
    from wattgpu.modeling.physical.synthetic import synthesize as draw

    settings = state.settings
    rows = draw(Catalog.load(settings.gpus_csv, settings.llms_csv), seed=seed)
    output.parent.mkdir(parents=True, exist_ok=True)
    rows.to_csv(output, index=False)
    click.echo(f"wrote {len(rows)} generated rows to {output}")


def _register_commands() -> None:
    """Attach the commands that live in their own modules."""
    from wattgpu.cli_data import fetch_command, import_command, llms_from_configs_command
    from wattgpu.cli_recommend import recommend_command

    data.add_command(import_command)
    data.add_command(fetch_command)
    data.add_command(llms_from_configs_command)
    cli.add_command(recommend_command)


_register_commands()


def main() -> None:
    """Console-script entry point."""
    # A crash in native code prints every thread's Python stack to stderr instead of dying
    # silently.
    faulthandler.enable()
    cli(prog_name="wattgpu")
