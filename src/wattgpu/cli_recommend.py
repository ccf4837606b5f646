"""``wattgpu recommend``: which GPU serves an LLM under a latency target and a load, least energy.

A thin shell over ``wattgpu.recommend``: it parses the options, calls the library, prints the
table (or JSON/CSV) and the verdict, and optionally draws the chart and logs an MLflow run. A
server's load that no one GPU holds (weights and KV cache) is asked again as fleets, as
``--fleet`` asks it, and the verdict says so.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

import click
import numpy as np
import pandas as pd

from wattgpu.cli_fleet import (
    fleet_chart,
    fleet_headline,
    fleet_options,
    fleet_request,
    format_fleet_table,
)
from wattgpu.cli_llm import asked_llm, model_config_option
from wattgpu.cli_options import (
    CliState,
    alias_option,
    engine_options,
    output_format_option,
    pass_state,
    quiet_mlflow,
    scenario_option,
    serving_setup_options,
)
from wattgpu.config import Settings

EXIT_NO_GPU = 3
# How the verdict begins where a load no one GPU holds was answered with fleets.
NO_ONE_GPU = "no one GPU holds the weights and this load's KV cache, so fleets (--fleet)"
# What the table format shows (JSON and CSV carry every column of the answer, these included).
TABLE_COLUMNS = {
    "rank": "rank",
    "gpu": "GPU",
    "power_w": "power W",
    "energy_j_per_token": "J/token",
    "energy_kwh_per_day": "kWh/day",
    "itl_ms": "ITL ms",
    "itl_p90_ms": "ITL p90 ms",
    "itl_p99_ms": "ITL p99 ms",
    "itl_upper_ms": "ITL upper ms",
    "itl_novelty": "ITL interval for",
    "meets_slo": "meets SLO",
    "meets_slo_upper": "at upper",
    "ttft_ms": "TTFT ms",
    "ttft_p90_ms": "TTFT p90 ms",
    "ttft_p99_ms": "TTFT p99 ms",
    "meets_ttft_slo": "meets TTFT SLO",
    "usd_per_day": "$/day",
    "usd_per_1m_tokens": "$/1M tokens",
    "cost_rank": "cost rank",
    "reason": "not ranked because",
}


def _cell(value: Any) -> str:
    if value is None or value is pd.NA or (isinstance(value, float) and math.isnan(value)):
        return ""
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return f"{value:.3g}" if abs(value) < 100 else f"{value:.0f}"
    return str(value)


def format_table(table: pd.DataFrame) -> str:
    """The answer as aligned text columns, best first (the columns of ``TABLE_COLUMNS``).

    The tails shown are those of the percentile ranked at (none at the median).
    """
    from wattgpu.recommendation import MEDIAN, SLO_PERCENTILES, at_percentile

    percentile = table.attrs.get("request", {}).get("slo_percentile", MEDIAN)
    shown = {at_percentile(c, percentile) for c in ("itl_ms", "ttft_ms")}
    tails = {at_percentile(c, p) for c in ("itl_ms", "ttft_ms") for p in SLO_PERCENTILES[1:]}
    columns = [c for c in TABLE_COLUMNS if c in table.columns and (c not in tails or c in shown)]
    if table["meets_slo"].isna().all():
        columns = [c for c in columns if c not in ("meets_slo", "meets_slo_upper")]
    cells = [[TABLE_COLUMNS[c] for c in columns]]
    cells += [[_cell(row[c]) for c in columns] for _, row in table.iterrows()]
    widths = [max(len(r[i]) for r in cells) for i in range(len(columns))]
    text = [c not in ("gpu", "reason", "itl_novelty") for c in columns]
    lines = [
        "  ".join(
            cell.rjust(width) if right else cell.ljust(width)
            for cell, width, right in zip(row, widths, text, strict=True)
        ).rstrip()
        for row in cells
    ]
    return "\n".join(lines)


# The ranked GPUs a chart names (a catalogue of a hundred GPUs ranks dozens: their names would
# cover the plot); the Pareto front is always named.
LABELLED_RANKS = 10
# Pixels kept free around a name (``_overlap``).
_LABEL_GAP = 1.0


def chart(table: pd.DataFrame, itl_slo_ms: float | None) -> Any:
    """Predicted ITL against power per GPU, with the intervals, the SLO and the Pareto front.

    Only the GPUs that matter (the first ``LABELLED_RANKS`` ranked, or on the Pareto front) are
    labelled, and labels that would overlap are moved apart; the best GPU's marker is hollow so
    its interval stays visible.
    """
    from matplotlib.ticker import FuncFormatter

    from wattgpu.lifecycle import plots

    shown = table[table["fits"] & table["power_w"].notna()]
    fig = plots.figure(8, 5.5)
    ax = fig.subplots()
    ranked = shown["rank"].notna().to_numpy(bool)
    _points(ax, shown, ranked)
    front = shown[shown["pareto"]].sort_values("power_w")
    ax.step(front["power_w"], front["itl_ms"], where="post", color="tab:blue", label="Pareto front")
    if itl_slo_ms is not None:
        ax.axhline(itl_slo_ms, color="tab:red", linestyle="--", label=f"SLO {itl_slo_ms:g} ms")
    best = shown[shown["rank"] == 1]
    if len(best):
        ax.scatter(
            best["power_w"],
            best["itl_ms"],
            marker="*",
            s=300,
            facecolors="none",
            edgecolors="darkgoldenrod",
            linewidths=1.5,
            zorder=4,
            label=f"best: {best['gpu'].iloc[0]}",
        )
    if len(shown) and shown["itl_ms"].max() > 10 * shown["itl_ms"].min():
        ax.set_yscale("log")
    plain = FuncFormatter(lambda value, _: f"{value:g}")
    ax.yaxis.set_major_formatter(plain)
    ax.yaxis.set_minor_formatter(
        plain if ax.get_yscale() == "log" else ax.yaxis.get_minor_formatter()
    )
    ax.set_xlabel("predicted mean power (W)")
    ax.set_ylabel("predicted inter-token latency (ms)")
    request = table.attrs.get("request", {})
    ax.set_title(f"{request.get('model', '')}: ITL against power per GPU", fontsize=10)
    ax.legend(fontsize=7)
    fig.tight_layout()
    named = (shown["rank"] <= LABELLED_RANKS).fillna(False).to_numpy(bool)
    named |= shown["pareto"].to_numpy(bool)
    _label(fig, ax, shown[named], shown)
    return fig


def _points(ax: Any, shown: pd.DataFrame, ranked: np.ndarray) -> None:
    """Each GPU's predicted power and ITL with their 90 % intervals, ranked ones in green."""
    for mask, colour, label in (
        (ranked, "tab:green", "ranked"),
        (~ranked, "tab:grey", "not ranked"),
    ):
        rows = shown[mask]
        if rows.empty:
            continue
        ax.errorbar(
            rows["power_w"],
            rows["itl_ms"],
            xerr=[rows["power_w"] - rows["power_lower_w"], rows["power_upper_w"] - rows["power_w"]],
            yerr=[rows["itl_ms"] - rows["itl_lower_ms"], rows["itl_upper_ms"] - rows["itl_ms"]],
            fmt="o",
            markersize=4,
            color=colour,
            ecolor=colour,
            elinewidth=0.8,
            alpha=0.8,
            zorder=3,
            label=f"{label} (90 % intervals)",
        )


# Where a label may sit around its point, in points: the ring beside the dot first (right,
# left, above, below, then the diagonals), then the same directions farther out.
_LABEL_DIRECTIONS = ((1, 0), (-1, 0), (0, 1), (0, -1), (1, 1), (-1, 1), (1, -1), (-1, -1))
_LABEL_RINGS = (4, 10, 16, 24)
_LABEL_SPOTS = tuple((dx, dy, ring) for ring in _LABEL_RINGS for dx, dy in _LABEL_DIRECTIONS)


def _label(fig: Any, ax: Any, rows: pd.DataFrame, points: pd.DataFrame) -> list[Any]:
    """Name each of ``rows`` beside its point, overlapping no name placed before and no point.

    Deterministic: the points in order of ITL (highest first), then power; each name takes the
    first free spot of ``_LABEL_DIRECTIONS`` on the nearest ring of ``_LABEL_RINGS``, else the
    spot that overlaps least. A name off the first ring gets a thin line to its point.

    Returns:
        The names, as placed.

    """
    from matplotlib.text import Text

    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    best_point = (points["rank"] == 1).fillna(False)
    xy = zip(points["power_w"], points["itl_ms"], best_point, strict=True)
    # a point's marker; the best one's star is larger
    dots = [_box_around(*ax.transData.transform((x, y)), 12 if best else 3) for x, y, best in xy]
    placed: list[Any] = []
    names = []
    for _, row in rows.sort_values(["itl_ms", "power_w"], ascending=[False, True]).iterrows():
        point, name = (row["power_w"], row["itl_ms"]), row["gpu"].removeprefix("NVIDIA ")
        probe = ax.annotate(name, point, (0, 0), textcoords="offset points", fontsize=6)
        spot, least = _LABEL_SPOTS[0], None
        for dx, dy, ring in _LABEL_SPOTS:
            _place(probe, dx, dy, ring)
            box = probe.get_window_extent(renderer)
            cost = sum(_overlap(box, other) for other in [*placed, *dots])
            if least is None or cost < least:
                spot, least = (dx, dy, ring), cost
            if cost == 0:
                break
        probe.remove()
        line = (
            None if spot[2] == _LABEL_RINGS[0] else {"arrowstyle": "-", "color": "grey", "lw": 0.4}
        )
        text = ax.annotate(
            name, point, (0, 0), textcoords="offset points", fontsize=6, arrowprops=line
        )
        _place(text, *spot)
        text.update_positions(renderer)
        placed.append(Text.get_window_extent(text, renderer))  # the name's, without its line
        names.append(text)
    return names


def _place(text: Any, dx: int, dy: int, ring: int) -> None:
    """Put ``text`` ``ring`` points from its point in direction (dx, dy), aligned away from it."""
    text.set_ha("left" if dx > 0 else "right" if dx < 0 else "center")
    text.set_va("bottom" if dy > 0 else "top" if dy < 0 else "center")
    text.xyann = (dx * ring, dy * ring)


def _box_around(x: float, y: float, half: float) -> Any:
    """A display-space box of ``half`` pixels around (x, y): a point's marker."""
    from matplotlib.transforms import Bbox

    return Bbox([[x - half, y - half], [x + half, y + half]])


def _overlap(one: Any, other: Any) -> float:
    """The area, in square pixels, that two boxes share, each grown by ``_LABEL_GAP``.

    Two names that merely touch share no area yet read as one: the gap keeps them apart.
    """
    width = min(one.x1, other.x1) - max(one.x0, other.x0) + 2 * _LABEL_GAP
    height = min(one.y1, other.y1) - max(one.y0, other.y0) + 2 * _LABEL_GAP
    return max(width, 0.0) * max(height, 0.0)


def _headline(table: pd.DataFrame) -> str:
    """The question ranked: the LLM, the load, the tokens and every limit it ranked under."""
    from wattgpu.recommendation import limits_text

    request = table.attrs.get("request", {})
    line = f"{request.get('model')}, {request.get('scenario')}"
    per_day = request.get("requests_per_day")
    if per_day:
        line += f" at {per_day / 86400:.3g} req/s on average ({per_day:,.0f} requests/day)"
    if request.get("concurrency") is not None:
        line += f" with {request['concurrency']:g} concurrent users"
    tokens = (request.get("input_tokens"), request.get("output_tokens"))
    line += f", {tokens[0]:.0f} input / {tokens[1]:.0f} output tokens"
    percentile = request.get("slo_percentile", 50)
    limits = limits_text(request.get("itl_slo_ms"), request.get("ttft_slo_ms"), percentile)
    if limits:
        line += f", {limits}"
        if percentile != 50:
            # a closed loop's TTFT tails are measured ratios where they stand (answering.tails)
            closed = request.get("concurrency") is not None
            line += f" (tails from the simulated serving loop{' or measured ratios' * closed})"
    if request.get("strict") and request.get("itl_slo_ms") is not None:
        line += " (strict: at the upper end of the ITL interval)"
    return line


def _log_run(
    settings: Settings, table: pd.DataFrame, figure: Any, verdict: str, options: dict[str, Any]
) -> str:
    from wattgpu.lifecycle import tracking

    tracking.configure(settings.tracking_uri)
    request = table.attrs.get("request", {})
    tags = {"wattgpu.kind": "recommendation", "wattgpu.model": str(request.get("model"))}
    with tracking.recommendation_run(f"recommend {request.get('model')}", tags) as run_id:
        tracking.log_params({k: v for k, v in options.items() if v is not None})
        tracking.log_frame(table, "recommendation/table.csv")
        tracking.log_text(verdict + "\n", "recommendation/verdict.txt")
        tracking.log_figure(figure, "recommendation/chart.png")
        best = table[table["rank"] == 1]
        if len(best):
            row = best.iloc[0]
            shown = ("power_w", "itl_ms", "energy_j_per_token", "energy_kwh_per_day", "gpus")
            tracking.log_metrics({f"best_{k}": float(row[k]) for k in shown if k in row})
        tracking.log_metrics({"ranked_gpus": float(table["rank"].notna().sum())})
    return run_id


EPILOG = """\b
Exit codes:
  0  a recommendation (the best GPU is on the verdict line)
  1  bad input (unknown model or GPU, bad rate, malformed profile or price file, ...)
  2  usage mistake (unknown option, ...)
  3  no GPU meets the SLO (or none fits); the verdict names the closest

\b
Load profile CSV: columns hour (each of 0-23 once), rate (req/s, >= 0).
Price CSV: columns gpu (catalogue name or alias), usd_per_hour (>= 0).
With --format json or csv the verdict goes to stderr, the table to stdout.
"""


@click.command(name="recommend", epilog=EPILOG)
@click.option(
    "--model",
    "llm",
    default=None,
    help="LLM id or alias from the catalogue; one the catalogue lacks is read from its "
    "config.json on the Hugging Face Hub.",
)
@model_config_option
@click.option("--itl-slo-ms", type=float, default=None, help="Inter-token latency target, ms.")
@click.option(
    "--ttft-slo-ms",
    type=float,
    default=None,
    help="Time-to-first-token target, ms (asks the TTFT model too).",
)
@click.option(
    "--slo-percentile",
    type=int,
    default=50,
    show_default=True,
    help="The percentile the ITL and TTFT targets hold at: 50 (the median) or a tail, 90 or "
    "99 (the median times the simulated serving loop's own ratio).",
)
@scenario_option
@click.option("--rate", type=float, default=None, help="Requests/s, all day.")
@click.option(
    "--requests-per-day", type=float, default=None, help="Requests a day (rate = N / 86400)."
)
@click.option(
    "--load-profile",
    type=click.Path(path_type=Path),
    default=None,
    help="CSV of the day's load: hour, rate.",
)
@click.option(
    "--concurrency",
    type=int,
    default=None,
    help="Concurrent users of a closed loop, all day (instead of a rate).",
)
@serving_setup_options
@engine_options
@fleet_options
@click.option("--output-tokens", type=int, default=None, help="Mean output tokens (256).")
@click.option("--input-tokens", type=int, default=None, help="Mean prompt tokens (512).")
@click.option("--gpus", default=None, help="Comma-separated GPU names (default: the catalogue).")
@click.option(
    "--price-file",
    type=click.Path(path_type=Path),
    default=None,
    help="CSV gpu,usd_per_hour: adds $/day, $ per 1M tokens and a cost rank.",
)
@alias_option
@click.option("--power-url", default=None, help="Ask this power model server (/invocations).")
@click.option("--itl-url", default=None, help="Ask this ITL model server (/invocations).")
@click.option("--strict", is_flag=True, help="Rank only GPUs whose ITL interval meets the SLO.")
@output_format_option
@click.option(
    "--plot",
    type=click.Path(path_type=Path),
    default=None,
    help="Write a PNG chart of ITL against power with the SLO and the Pareto front.",
)
@click.option(
    "--log",
    "log_run",
    is_flag=True,
    help="Log a run (table, chart) to experiment wattgpu-recommend.",
)
@pass_state
def recommend_command(
    state: CliState,
    llm: str | None,
    model_config: Path | None,
    itl_slo_ms: float | None,
    ttft_slo_ms: float | None,
    slo_percentile: int,
    scenario: str,
    rate: float | None,
    requests_per_day: float | None,
    load_profile: Path | None,
    concurrency: int | None,
    output_tokens: int | None,
    input_tokens: int | None,
    gpus: str | None,
    price_file: Path | None,
    alias: str,
    power_url: str | None,
    itl_url: str | None,
    strict: bool,
    fmt: str,
    plot: Path | None,
    log_run: bool,
    **setup: Any,
) -> None:
    """Which GPU serves an LLM under an ITL target and a load for the least energy.

    Predicts power and ITL on every catalogue GPU (or --gpus) with the promoted registry models
    (or the model servers at --power-url/--itl-url), leaves out those where the weights and the
    load's KV cache do not fit, and ranks those meeting the SLO by energy per output token (the
    order of energy per day and, for a server, of mean power). With --slo-percentile 90 or 99
    the targets hold at that tail of ITL and TTFT instead of the median. A server's load that no
    one GPU holds is answered with fleets, as --fleet would.
    """
    quiet_mlflow()
    from wattgpu import recommendation as rec

    names = [g.strip() for g in gpus.split(",") if g.strip()] if gpus else None
    asked = asked_llm(state.settings, llm, model_config)
    fleet = fleet_request(setup)  # --fleet, --tp, --max-gpus, --scaling, --rank-by, if given
    ask = functools.partial(
        rec.recommend,
        asked.name,
        model_config=asked.config,
        itl_slo_ms=itl_slo_ms,
        ttft_slo_ms=ttft_slo_ms,
        scenario=scenario,
        rate=rate,
        requests_per_day=requests_per_day,
        load_profile=load_profile,
        concurrency=concurrency,
        output_tokens=output_tokens,
        input_tokens=input_tokens,
        gpus=names,
        prices=price_file,
        alias=alias,
        power_url=power_url,
        itl_url=itl_url,
        settings=state.settings,
        strict=strict,
        names=_option_names(),
        slo_percentile=slo_percentile,
        setup=setup,  # --client, the engine knobs, --engine ... --dtype (engine_options)
    )
    table = _answered(ask, fleet)
    verdict = _verdict(table, strict)
    figure = _figure(table) if (plot or log_run) else None
    if plot:
        figure.savefig(plot, format="png", dpi=120)
    run_id = None
    if log_run:
        options = {**table.attrs["request"], "gpus": gpus, "price_file": price_file}
        options |= {"rate": rate, "load_profile": load_profile, "alias": alias}
        run_id = _log_run(state.settings, table, figure, verdict, options)
    _print_answer(table, verdict, fmt, plot, run_id)
    if not (table["rank"] == 1).any():
        click.get_current_context().exit(EXIT_NO_GPU)


def _answered(ask: Callable[..., pd.DataFrame], fleet: dict[str, Any] | None) -> pd.DataFrame:
    """``ask``'s answer; where no fleet was asked and no one GPU holds the load, its fleets."""
    table = ask(fleet=fleet)
    if fleet is None and _no_gpu_holds_it(table):
        # a server's load that no one GPU holds is a fleet's question: answer it, not exit 3
        table = ask(fleet={})
        table.attrs["request"]["instead_of_one_gpu"] = True
    return table


def _no_gpu_holds_it(table: pd.DataFrame) -> bool:
    """No GPU holds the weights and the load's KV cache, for a server (which fleets can serve)."""
    request = table.attrs["request"]
    return request["scenario"] == "server" and not table["fits"].any()


def _verdict(table: pd.DataFrame, strict: bool) -> str:
    """The answer's one line: the best GPU (or fleet) against every limit, or why none."""
    from wattgpu import recommendation as rec

    request = table.attrs["request"]
    if request.get("instead_of_one_gpu"):
        return f"{NO_ONE_GPU}: {rec.fleet_verdict(table, request)}"
    if request.get("fleet"):
        return rec.fleet_verdict(table, request)
    return rec.verdict(
        table, request["itl_slo_ms"], strict, request["ttft_slo_ms"], request["slo_percentile"]
    )


def _figure(table: pd.DataFrame) -> Any:
    """The chart: ITL against power per GPU, or a fleet's GPUs and power through the day."""
    request = table.attrs["request"]
    return fleet_chart(table) if request.get("fleet") else chart(table, request["itl_slo_ms"])


def _option_names() -> dict[str, str]:
    """What a message calls each of the library's inputs: the option as typed here."""
    params = click.get_current_context().command.params
    options = {p.name: p.opts[0] for p in params if isinstance(p, click.Option) and p.name}
    return {**options, "model": options["llm"], "prices": options["price_file"]}


def _print_answer(
    table: pd.DataFrame, verdict: str, fmt: str, plot: Path | None, run_id: str | None
) -> None:
    """The table in ``fmt`` on stdout; the verdict beside it (on stderr for json and csv)."""
    if fmt == "json":
        click.echo(table.to_json(orient="records", indent=2))
        click.echo(verdict, err=True)
    elif fmt == "csv":
        click.echo(table.to_csv(index=False), nl=False)
        click.echo(verdict, err=True)
    elif table.attrs["request"].get("fleet"):
        click.echo(f"{_headline(table)}; {fleet_headline(table.attrs['request'])}")
        click.echo(format_fleet_table(table))
        click.echo(verdict)
    else:
        click.echo(_headline(table))
        click.echo(format_table(table))
        click.echo(verdict)
    if plot:
        click.echo(f"chart: {plot}", err=True)
    if run_id:
        click.echo(f"logged run {run_id} to experiment wattgpu-recommend", err=True)
