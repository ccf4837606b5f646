"""Each row's serving set-up as the simulator takes it: client, engine scheduler, host time.

From a row's load (``scenario``, ``users``, ``request_rate_rps``, ``batch_size``, lengths), its
client (``client``: a harness of ``data/clients.csv``, else the one its load implies), its
engine's release line (``data/engine_lines.csv``, by ``engine``, ``engine_version`` or
``engine_year``, or the line its client's server ran: ``clients.csv``'s ``engine_line``), the
user's engine knobs (``max_num_seqs``, ``max_batched_tokens``, ``chunked_prefill``), its GPUs'
memory, LLM and format (``weight_bytes``, ``kv_bytes_per_token``), and a host time fitted to its
line (``host_fixed_s``, ``host_per_seq_s``: ``host``). Pure; the tables are read once per
process.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from functools import cache

import numpy as np

from wattgpu.arrays import blanks, unique_codes
from wattgpu.data.clients import CLIENT_FOR_LOAD, FIXED, LOGNORMAL, UNKNOWN, clients
from wattgpu.data.clients import NUMERIC as CLIENT_NUMERIC
from wattgpu.data.engine_lines import MIN_CONTEXT_BUDGET, POLICIES, engine_lines
from wattgpu.modeling.physical.operations import Rows, length, values
from wattgpu.modeling.serving.loop import CLOSED, ONESHOT, POISSON, ROUNDS, Client
from wattgpu.modeling.serving.scheduler import Scheduler
from wattgpu.modeling.serving.step import HostTime

# The engine knobs a user may set, and what each may be.
KNOB_RANGES = {
    "max_num_seqs": (1.0, 65536.0),
    "max_batched_tokens": (16.0, 1048576.0),
    "chunked_prefill": (0.0, 1.0),
}
# A context length for an LLM whose catalogue row gives none.
DEFAULT_CONTEXT = 4096.0
# An open loop's warm-up requests, and the most it measures.
POISSON_WARMUP, POISSON_MEASURED = 30.0, 100.0
# A closed loop's statistics settle within a request per user of warm-up and six measured ones:
# the simulation stops there even where the harness sent more. Its medians settle within three;
# its tails need more (issue 68): at six per user and at least ``MIN_MEASURED`` requests,
# doubling both moves the ITL p99 of LLM-Pilot's 494 rows by 1.9 % (median over the rows; at
# three and 24, by 4.6 %), checked in tests/test_jitter.py.
SETTLED_WARMUP, SETTLED_MEASURED = 1.0, 6.0
# ... and never fewer measured requests than this: a few users' p99 needs a few hundred gaps.
MIN_MEASURED = 300.0
_KINDS = {"closed": CLOSED, "rounds": ROUNDS, "poisson": POISSON, "batch": ONESHOT}


@dataclass(frozen=True)
class Setup:
    """What the simulator needs of each row besides its step's costs."""

    host: HostTime
    scheduler: Scheduler
    client: Client


def setup(rows: Rows) -> Setup:
    """Each row's client, scheduler and host time (see the module docstring)."""
    n = length(rows)
    harness = _harness(rows, n)
    lines = _lines(rows, n, harness)
    table = engine_lines()
    gpus = np.maximum(values(rows, "num_gpus", 1.0), 1.0)
    memory_gib = values(rows, "gpu_memory_gb", 80.0, positive=True) * 1e9 / 2**30
    gpu = np.asarray(rows["gpu"], dtype=object) if "gpu" in rows else np.full(n, "", object)
    budget = table.tiered("max_batched_tokens", lines, memory_gib, gpu.astype(str))
    context = np.maximum(values(rows, "llm_max_position_embeddings", DEFAULT_CONTEXT, True), 1.0)
    budget = np.where(np.isnan(budget), np.maximum(context, MIN_CONTEXT_BUDGET), budget)
    budget = _override(budget, harness["max_batched_tokens"])
    budget = _override(budget, values(rows, "max_batched_tokens", np.nan, positive=True))
    seqs = table.tiered("max_num_seqs", lines, memory_gib, gpu.astype(str))
    batch = values(rows, "batch_size", np.nan, positive=True)
    seqs = _override(seqs, np.where(harness["batch_is_max_num_seqs"] > 0, batch, np.nan))
    seqs = _override(seqs, values(rows, "max_num_seqs", np.nan, positive=True))
    line_chunks = _line_columns()["chunked_prefill"][lines]
    chunked = _override(line_chunks, harness["chunked_prefill"])
    chunked = _override(chunked, values(rows, "chunked_prefill", np.nan))
    # chunking turned off on a line that chunks: a step must hold a whole prompt, so the budget
    # is the context length unless one was stated (vLLM's rule)
    stated = np.isfinite(harness["max_batched_tokens"]) | np.isfinite(
        values(rows, "max_batched_tokens", np.nan, positive=True)
    )
    whole = np.maximum(context, MIN_CONTEXT_BUDGET)
    off = (line_chunks > 0) & (chunked <= 0) & ~stated
    budget = np.where(off, np.maximum(budget, whole), budget)
    client = _client(rows, n, harness, seqs)
    line = {name: column[lines] for name, column in _line_columns().items()}
    policy = line["policy"]
    # a static engine takes its whole batch
    seqs = np.where(policy == POLICIES.index("static"), np.maximum(seqs, client.users), seqs)
    scheduler = Scheduler(
        policy=policy,
        chunked=chunked > 0,
        budget=budget,
        max_seqs=seqs,
        # an engine that starts holds at least one whole request (a measured row ran)
        kv_tokens=np.maximum(
            _kv_tokens(rows, line, harness["memory_fraction"], gpus),
            client.prompt + client.answer,
        ),
        reserve_full=line["reserve_full"],
        waiting_ratio=np.nan_to_num(line["waiting_served_ratio"]),
        max_waiting_steps=np.nan_to_num(line["max_waiting_steps"], nan=np.inf),
    )
    layers = values(rows, "llm_num_layers", 32.0, positive=True)
    share = _override(np.ones(n), harness["host_share"])
    host = HostTime(
        fixed=share
        * (
            line["host_fixed_s"]
            + line["host_per_shard_s"] * (gpus - 1.0)
            + line["host_per_layer_s"] * layers
        ),
        per_seq=share * line["host_per_seq_s"],
    )
    # a fitted host time (``host.fit_host_time``) stands over the table's guess
    host = HostTime(
        fixed=_override(host.fixed, values(rows, "host_fixed_s", np.nan)),
        per_seq=_override(host.per_seq, values(rows, "host_per_seq_s", np.nan)),
    )
    return Setup(host=host, scheduler=scheduler, client=client)


@cache
def _line_columns() -> dict[str, np.ndarray]:
    """The columns of ``engine_lines()`` that ``setup`` reads, as arrays, converted once.

    (Converting them took most of a one-row query's set-up time.)
    """
    table = engine_lines()
    numeric = (
        "memory_fraction",
        "waiting_served_ratio",
        "max_waiting_steps",
        "host_fixed_s",
        "host_per_shard_s",
        "host_per_layer_s",
        "host_per_seq_s",
    )
    columns = {name: table.column(name).to_numpy() for name in numeric}
    columns["chunked_prefill"] = table.table["chunked_prefill"].astype(float).to_numpy()
    columns["policy"] = np.array([POLICIES.index(p) for p in table.table["policy"]])
    columns["reserve_full"] = (table.table["reserve"] == "full").to_numpy()
    columns["of_free"] = (table.table["memory_of"] == "free").to_numpy()
    return columns


def _override(default: np.ndarray, given: np.ndarray) -> np.ndarray:
    """``given`` where it is stated, else ``default``."""
    return np.where(np.isfinite(given), given, default)


def _lines(rows: Rows, n: int, harness: Mapping[str, np.ndarray] | None = None) -> np.ndarray:
    """Each row's engine release line (a row of ``engine_lines.csv``).

    ``harness``: the rows' ``_harness`` where the caller has it.
    """
    engines = np.asarray(rows["engine"], dtype=object) if "engine" in rows else np.full(n, None)
    versions = (
        np.asarray(rows["engine_version"], dtype=object)
        if "engine_version" in rows
        else np.full(n, None, dtype=object)
    )
    years = values(rows, "engine_year", np.nan)
    lines = engine_lines().lines_of(engines, versions, years)
    # the line a client's server ran, where the engine's name alone does not say it
    stated = (_harness(rows, n) if harness is None else harness)["engine_line"]
    if not blanks(stated).all():
        index = {name: row for row, name in enumerate(engine_lines().table["line"])}
        named = np.array([index.get(str(name), -1) for name in stated])
        lines = np.where(named >= 0, named, lines)
    return lines


def engine_line_names(rows: Rows) -> np.ndarray:
    """Each row's engine release line by name (``engine_lines.csv``'s ``line``)."""
    names = engine_lines().table["line"].to_numpy(object)
    return names[_lines(rows, length(rows))]


def client_names(rows: Rows) -> np.ndarray:
    """Each row's client: its stated ``client``, else the one its load implies."""
    n = length(rows)
    stated = np.asarray(rows["client"], dtype=object) if "client" in rows else np.full(n, None)
    server = np.asarray(rows["scenario"] == "server") if "scenario" in rows else np.zeros(n, bool)
    users = values(rows, "users", np.nan, positive=True)
    by_load = np.where(
        server & np.isfinite(users),
        CLIENT_FOR_LOAD["concurrency"],
        np.where(server, CLIENT_FOR_LOAD["rate"], CLIENT_FOR_LOAD["batch"]),
    )
    return np.where(blanks(stated), by_load, stated).astype(object)


def _harness(rows: Rows, n: int) -> dict[str, np.ndarray]:
    """The client table's columns for each row's client."""
    table = clients().table
    codes, names = unique_codes(client_names(rows))
    picked = table.loc[[str(x) for x in names]]
    out: dict[str, np.ndarray] = {}
    for column in picked.columns:
        values_ = picked[column].to_numpy()
        out[column] = values_[codes] if len(names) else np.empty(0)
    for column in CLIENT_NUMERIC:
        out[column] = out[column].astype(float)
    return out


def _client(rows: Rows, n: int, harness: Mapping[str, np.ndarray], seqs: np.ndarray) -> Client:
    """Each row's client: who sends what, how many, how long."""
    kind = np.array([_KINDS[k] for k in harness["kind"]], dtype=int)
    users = values(rows, "users", np.nan, positive=True)
    batch = values(rows, "batch_size", np.nan, positive=True)
    closed_users = np.where(np.isfinite(users), users, batch)
    # a batch: the requests stated by the harness, else the row's batch, else the engine's fill
    requests = np.where(
        harness["batch_is_max_num_seqs"] > 0,
        harness["total_requests"],
        np.where(np.isfinite(batch), batch, np.nan),
    )
    requests = np.where(np.isfinite(requests), requests, seqs)
    # more requests than the engine runs at once: a closed loop of its cap until the queue empties
    steady = (kind == ONESHOT) & (requests > seqs)
    kind = np.where(steady, CLOSED, kind)
    population = np.where(kind == ONESHOT, requests, np.where(steady, seqs, closed_users))
    population = np.maximum(np.nan_to_num(population, nan=1.0), 1.0)
    # what a harness does not state (blank in clients.csv) gets the settled counts (np.fmin)
    warmup = np.fmin(np.where(steady, SETTLED_WARMUP, harness["warmup_per_user"]), SETTLED_WARMUP)
    measured = np.fmin(
        np.where(steady, SETTLED_MEASURED, harness["requests_per_user"]), SETTLED_MEASURED
    )
    closed = (kind == CLOSED) | (kind == ROUNDS)
    kinds = list(zip(*lengths_of(rows, harness), strict=True))
    shapes_in, shapes_out = (
        np.array([_shape(str(name), spread, side) for name, spread in kinds]).reshape(n, -1)
        for side in ("input", "output")
    )
    return Client(
        kind=kind,
        users=population,
        # an idle server still answers the odd request: one every 11 days
        rate=np.maximum(values(rows, "request_rate_rps", 0.0), 1e-6),
        prompt=np.maximum(values(rows, "input_tokens", 512.0), 1.0),
        answer=np.maximum(values(rows, "output_tokens", 256.0), 1.0),
        prompt_shape=shapes_in,
        answer_shape=shapes_out,
        warmup=np.select([closed, kind == POISSON], [warmup * population, POISSON_WARMUP], 0.0),
        measured=np.select(
            [closed, kind == POISSON],
            [
                np.maximum(measured * population, MIN_MEASURED),
                np.fmin(harness["total_requests"], POISSON_MEASURED),
            ],
            population,
        ),
    )


# A query's spread of lengths (REST ``length_spread``, ``--length-spread``): the sigma of a
# lognormal length around the query's means, in place of its client's lengths; 0, every request
# at the means.
LENGTH_SPREAD = "length_spread"


def lengths_of(rows: Rows, harness: Mapping[str, np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """Each row's lengths (a ``clients.csv`` kind or distribution) and spread.

    Its client's, unless the row states a ``LENGTH_SPREAD``: then lognormal with that sigma (0:
    fixed).
    """
    lengths = np.asarray(harness["lengths"], dtype=object).copy()
    spread = np.asarray(harness["spread"], dtype=float).copy()
    stated = values(rows, LENGTH_SPREAD, np.nan)
    given = np.isfinite(stated)
    lengths[given] = np.where(stated[given] > 0, LOGNORMAL, FIXED)
    spread[given] = stated[given]
    return lengths, spread


def assumed_spread(rows: Rows) -> np.ndarray:
    """The lognormal sigma each row's lengths are drawn with, as its answer names it.

    0: every request at the means; NaN: its client's lengths have another shape (``uniform`` or
    a named distribution, which the client names).
    """
    lengths, spread = lengths_of(rows, _harness(rows, length(rows)))
    return np.select(
        [lengths == LOGNORMAL, (lengths == FIXED) | (lengths == UNKNOWN)],
        [np.nan_to_num(spread, nan=0.0), 0.0],
        np.nan,
    )


def _shape(lengths: str, spread: float, side: str) -> np.ndarray:
    return clients().shape(lengths, spread, side)


def _kv_tokens(
    rows: Rows, line: Mapping[str, np.ndarray], fraction_override: np.ndarray, gpus: np.ndarray
) -> np.ndarray:
    """Tokens the KV cache holds: the engine's share of memory after the weights, per token.

    ``line``: each row's line's ``_line_columns``.
    """
    fraction = _override(line["memory_fraction"], fraction_override)
    total = values(rows, "gpu_memory_gb", 80.0, positive=True) * 1e9 * gpus
    weights = values(rows, "weight_bytes", 0.0)
    of_free = line["of_free"]
    room = np.where(of_free, fraction * (total - weights), fraction * total - weights)
    per_token = values(rows, "kv_bytes_per_token", 0.0)
    with np.errstate(divide="ignore", invalid="ignore"):
        tokens = np.where(per_token > 0, np.maximum(room, 0.0) / per_token, np.inf)
    return tokens
