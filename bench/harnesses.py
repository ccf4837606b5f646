"""The harness of each shipped source, as the data states it (for docs/data.md).

One row per client that a shipped measurement names: its rows, the client's kind and size (the
load columns its rows sweep), lengths, requests, the engine settings its harness set, the
statistics its latency columns hold, and which facts are inferred or unknown; then each client's
evidence (``data/clients.csv``'s ``source``); then the engine release lines' scheduling
(``data/engine_lines.csv``).

python bench/harnesses.py [--data DIR] [--measurements PATH ...]
"""

from __future__ import annotations

import argparse
import datetime as dt
import sys

import pandas as pd
from benchinfo import add_data_arguments, machine

from wattgpu.data.clients import CLIENTS_FILE, provenance_fields
from wattgpu.data.engine_lines import ENGINE_LINES_FILE
from wattgpu.data.measurements import expand_paths, read_measurements

LOADS = (("concurrency", "users"), ("request_rate_rps", "req/s"), ("batch_size", "batch"))
SETTINGS = (
    ("max_batched_tokens", "budget"),
    ("memory_fraction", "memory"),
    ("chunked_prefill", "chunked"),
)


def _plain(text: object) -> str:
    """A cell for a markdown table: its ``|``-separated values written with ``/``."""
    return str(text).replace("|", "/")


def _span(values: pd.Series, unit: str) -> str:
    """``1-128 users`` (or ``8 users``); empty where no row gives the column."""
    given = values.dropna()
    if given.empty:
        return ""
    low, high = f"{given.min():,.4g}", f"{given.max():,.4g}"
    return f"{low} {unit}" if low == high else f"{low}-{high} {unit}"


def _cell(client: pd.Series, column: str) -> str:
    """A client's value, or ``unknown`` where it names the field unknown, or ``-``."""
    if column in provenance_fields(client["unknown"]):
        return "unknown"
    value = client[column]
    if pd.isna(value):
        return "-"
    text = f"{value:g}" if isinstance(value, float) else str(value)
    return f"{text}*" if column in provenance_fields(client["inferred"]) else text


def _requests(client: pd.Series) -> str:
    per_user = [_cell(client, c) for c in ("warmup_per_user", "requests_per_user")]
    if per_user != ["-", "-"]:
        return f"{per_user[0]} + {per_user[1]} a user"
    return _cell(client, "total_requests")


def harness_table(rows: pd.DataFrame, clients: pd.DataFrame) -> list[str]:
    """The markdown table: one line per client that ``rows`` name."""
    lines = [
        "| client | rows | kind | size | lengths | requests (warm-up + measured) | engine "
        "settings | ITL column | TTFT statistic | inferred (*) | unknown |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for name, part in rows.groupby("client", sort=True):
        client = clients.loc[name]
        size = ", ".join(filter(None, (_span(part[c], unit) for c, unit in LOADS)))
        settings = ", ".join(f"{label} {_cell(client, c)}" for c, label in SETTINGS)
        if client["batch_is_max_num_seqs"] == 1:
            settings += ", batch = max-num-seqs"
        kinds = "; ".join(sorted(part["itl_kind"].dropna().unique())) or "(none)"
        ttft = _cell(client, "ttft_statistic") if part["ttft_s"].notna().any() else "(no TTFT)"
        unknown = provenance_fields(client["unknown"])
        lines.append(
            f"| {name} | {len(part)} | {_cell(client, 'kind')} | {size} | "
            f"{_cell(client, 'lengths')} | {_requests(client)} | {settings} | {kinds} | {ttft} | "
            f"{len(provenance_fields(client['inferred']))} | {len(unknown)}: "
            f"{', '.join(unknown) or '-'} |"
        )
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_data_arguments(parser)
    args = parser.parse_args()
    rows = read_measurements(expand_paths(args.measurements or [args.data / "measurements"]))
    clients = pd.read_csv(args.data / CLIENTS_FILE).set_index("client", drop=False)
    print(f"- date: {dt.datetime.now().astimezone().isoformat(timespec='seconds')}")
    print(f"- machine: {machine()}")
    print(f"- command: python bench/harnesses.py {' '.join(sys.argv[1:])}".rstrip())
    print()
    print("\n".join(harness_table(rows[rows["client"].notna()], clients)))
    print()
    for name in sorted(rows["client"].dropna().unique()):
        print(f"- **{name}**: {clients.at[name, 'source']}")
    print()
    print(
        "| line | engine | releases | policy | chunked prefill | token budget | running cap "
        "| tiers (GiB) | memory | preemption | to fit (no source publishes it) |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    lines = pd.read_csv(args.data / ENGINE_LINES_FILE, dtype=str, keep_default_na=False)
    for _, line in lines.iterrows():
        print(
            f"| {line['line']} | {line['engine']} | {_plain(line['versions'] or '(all)')} | "
            f"{line['policy']} | {line['chunked_prefill']} | {_plain(line['max_batched_tokens'])} "
            f"| {_plain(line['max_num_seqs'])} | {_plain(line['tier_gib'] or '-')} | "
            f"{line['memory_fraction']} | {line['preemption']} | {_plain(line['to_fit'])} |"
        )


if __name__ == "__main__":
    main()
