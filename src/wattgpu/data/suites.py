"""The expectation suites of the data tables, built in code, and the derived check columns.

The catalogues (``gpus``, ``llms``) and the measurements are described here; the serving tables
(``engine_lines``, ``clients``, ``length_distributions``) in :mod:`wattgpu.data.serving_suites`.
This module is the source of truth for the suites in ``expectations/*.json``:
``python -m wattgpu.data.validation`` rewrites those files from :func:`build_suites`, and a test
fails when they drift apart.

Some rules span columns or tables (boost clock at least the base clock, heads dividing the hidden
size, power within 1.5 x the GPU's TDP, names that resolve through the catalogue, a client
that ``clients.csv`` lists). Those are
checked on derived columns that the ``derive_*_checks`` functions add to a copy of the table
before Great Expectations sees it. An expectation whose ``meta`` names ``examples_from`` reports
the values of those columns as its failing examples (the GPU name, not ``False``).

Nothing here imports Great Expectations; :mod:`wattgpu.data.validation` turns these plain
dictionaries into suites.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np
import pandas as pd

from wattgpu.data.catalog import (
    GPU_COLUMNS,
    GPU_LINK_COLUMNS,
    GPU_MEMORY_BUS_COLUMNS,
    GPU_NUMERIC_COLUMNS,
    GPU_THROUGHPUT_COLUMNS,
    KERNEL_FEATURES,
    LLM_ATTENTION_COLUMNS,
    LLM_COLUMNS,
    Catalog,
)
from wattgpu.data.clients import CLIENT_FOR_LOAD, client_kinds
from wattgpu.data.engine_lines import engine_lines
from wattgpu.data.formats import KNOWN_FORMATS
from wattgpu.data.measurements import OPTIONAL_COLUMNS, REQUIRED_COLUMNS, SCENARIOS, TAIL_COLUMNS
from wattgpu.data.names import normalise_name
from wattgpu.data.serving_suites import (
    client_expectations,
    engine_line_expectations,
    length_expectations,
)
from wattgpu.data.suite_parts import (
    between,
    examples_from,
    exists,
    expectation,
    holds,
    not_null,
    numeric,
    numeric_types,
    text_types,
)
from wattgpu.data.tensor_rates import PEAK_TOLERANCE, peaks_agree, read_tensor_rates

TABLES = ("gpus", "llms", "measurements", "engine_lines", "clients", "length_distributions")

MEMORY_TYPES = [
    "GDDR5",
    "GDDR5X",
    "GDDR6",
    "GDDR6X",
    "GDDR7",
    "HBM2",
    "HBM2e",
    "HBM3",
    "HBM3e",
    "LPDDR5X",
]
LLM_DTYPES = ["bfloat16", "float16", "float32"]
# The attention layout: multi-head, grouped-query, multi-query, multi-head latent (DeepSeek's
# compressed KV), sliding (some layers attend to a window only, e.g. gpt-oss), linear_hybrid
# (linear-attention layers beside a few full ones, e.g. Qwen3.5), or none (a recurrent model).
LLM_ATTENTION = ["mha", "gqa", "mqa", "mla", "sliding", "linear_hybrid", "none"]
# Optional catalogue columns (blank: a dense LLM, its attention read from its heads, its
# checkpoint in ``dtype``); derive_llm_checks adds them as blanks where a table lacks them.
LLM_OPTIONAL_COLUMNS = (
    "num_experts",
    "experts_per_token",
    "shared_experts",
    "attention",
    "weight_format",
    "moe_intermediate_size",
    *LLM_ATTENTION_COLUMNS,
)
LLM_ARCHS = ["decoder", "encoder-decoder", "recurrent", "hybrid"]
GPU_VENDORS = ["NVIDIA"]
# CUDA compute capabilities of Volta to Blackwell Ultra (7.2, 8.7, 11.0 and 12.1 are Jetson/Thor
# and DGX Spark parts, here so a user's catalogue may list them).
COMPUTE_CAPABILITIES = [7.0, 7.2, 7.5, 8.0, 8.6, 8.7, 8.9, 9.0, 10.0, 10.3, 11.0, 12.0, 12.1]
# What every GPU needs: the physical quantities the features and the prior read (memory,
# bandwidth, FP16 peak, TDP), its year, process and compute capability. The rest may be blank
# where the vendor publishes no figure (GB200/GB300 clocks, SMs, L2): blank, never a guess.
GPU_REQUIRED_NUMERIC = (
    "release_year",
    "memory_gb",
    "memory_bandwidth_gb_s",
    "fp16_tensor_tflops",
    "tdp_w",
    "process_nm",
    "compute_capability",
)
GPU_ALL_NUMERIC = (
    *GPU_NUMERIC_COLUMNS,
    "compute_capability",
    *GPU_THROUGHPUT_COLUMNS,
    *GPU_LINK_COLUMNS,
    *GPU_MEMORY_BUS_COLUMNS,
    "tensor_clock_mhz",
)
# How far a sheet's bandwidth may lie from its bus width x data rate: sheets round (the V100's
# 4096 bits at 1.75 Gbps is 896 GB/s, written 900), a wrong row is off by far more.
BANDWIDTH_TOLERANCE = 0.03
# The least FP32-accumulate tensor rate over the FP16-accumulate one: half (GeForce), less the
# sheets' rounding (the GA102 whitepaper's RTX 3070: 40.6 of 81.3).
MIN_FP32ACC_OVER_FP16 = 0.495
# The least tensor clock over the boost clock: sheets quote Hopper's peaks at up to 13 % below it
# (H100 NVL: 1545 of 1785 MHz); a tensor clock is never above the boost.
MIN_TENSOR_CLOCK_OVER_BOOST = 0.85
# How GPUs reach their peers (``interconnect``); blank: not stated.
INTERCONNECTS = ["NVLink", "PCIe"]

# num_kv_layers is optional (the catalogue defaults it to num_layers).
LLM_REQUIRED_COLUMNS = tuple(c for c in LLM_COLUMNS if c != "num_kv_layers")
LLM_REQUIRED_NUMERIC = (
    "params_b",
    "active_params_b",
    "num_layers",
    "hidden_size",
    "num_attention_heads",
    "num_kv_heads",
    "head_dim",
    "intermediate_size",
    "vocab_size",
)
MEASUREMENT_NUMERIC = ("mean_power_w", "itl_s")

# (column, min, max) for expect_column_values_to_be_between, bounds inclusive.
GPU_RANGES = (
    ("release_year", 2015, 2030),
    ("memory_gb", 8, 300),  # the catalogue holds GPUs of 8 GB and more (issue 59)
    ("memory_bandwidth_gb_s", 100, 20000),
    ("fp16_tensor_tflops", 5, 5000),
    ("fp32_tflops", 1, 1000),
    ("tdp_w", 30, 1500),
    ("base_clock_mhz", 300, 3000),
    ("boost_clock_mhz", 300, 3000),
    ("tensor_clock_mhz", 300, 3000),
    ("sm_count", 10, 300),
    ("l2_cache_mb", 1, 1024),
    ("transistors_m", 1000, 1000000),
    ("process_nm", 2, 20),
    ("fp8_tensor_tflops", 10, 50000),
    ("fp4_tensor_tflops", 10, 100000),
    ("int8_tensor_tops", 5, 50000),
    ("int4_tensor_tops", 10, 100000),
    ("fp32acc_tensor_tflops", 5, 5000),
    ("nvlink_bandwidth_gb_s", 50, 4000),  # both directions, per GPU
    ("pcie_generation", 3, 6),
    ("pcie_lanes", 1, 16),
    ("memory_bus_bits", 32, 8192),
    ("memory_data_rate_gbps", 0.5, 40),
)
LLM_RANGES = (
    # up to Kimi-K2's 1.03 trillion
    ("params_b", 0.01, 2000),
    ("num_layers", 1, 200),
    ("hidden_size", 64, 32768),
    ("num_attention_heads", 1, 1024),
    ("num_kv_heads", 1, 1024),
    ("head_dim", 16, 512),
    ("vocab_size", 1000, 300000),
)
MEASUREMENT_MINIMA = (
    ("request_rate_rps", 0),
    ("batch_size", 1),
    ("input_tokens", 1),
    ("output_tokens", 1),
    ("concurrency", 1),
)
MAX_POWER_OVER_TDP = 1.5
MAX_ITL_S = 60
# A first token later than 10 minutes is a stalled run or a unit mistake (ms for s).
MAX_TTFT_S = 600
TAIL_MAXIMA = {c: MAX_TTFT_S if c.startswith("ttft") else MAX_ITL_S for c in TAIL_COLUMNS}
# Each latency's columns, median first (``ttft_s`` and ``itl_s`` are the medians of the rows
# that give tails); each must be at most the next.
TAIL_ORDER = (
    ("ttft_s", "ttft_p90_s", "ttft_p99_s"),
    ("itl_s", "itl_p90_s", "itl_p99_s"),
)


def gpu_expectations() -> list[dict[str, Any]]:
    """Return the GPU catalogue's expectations."""
    text = ("gpu", "vendor", "architecture", "form_factor", "memory_type")
    return [
        *exists((*GPU_COLUMNS, *GPU_THROUGHPUT_COLUMNS)),
        *text_types((*text, "aliases")),
        *numeric_types(GPU_ALL_NUMERIC),
        expectation("expect_column_values_to_be_unique", column="gpu"),
        # One spelling, one GPU: no name or alias of a row is, after normalisation, a name or
        # alias of another row (the resolver could not tell which GPU it means).
        expectation(
            "expect_column_values_to_be_in_set",
            column="names_its_own",
            value_set=[True],
            meta=examples_from("gpu"),
        ),
        *not_null((*text, *GPU_REQUIRED_NUMERIC), ("gpu",)),
        *[between(c, lo, hi) for c, lo, hi in GPU_RANGES],
        between("boost_over_base_clock", 1, None, meta=examples_from("gpu")),
        expectation(
            "expect_column_values_to_be_in_set",
            column="compute_capability",
            value_set=COMPUTE_CAPABILITIES,
            meta=examples_from("gpu"),
        ),
        # FP8 tensor cores arrive with SM89 (Ada) and SM90 (Hopper), FP4 with SM100 (Blackwell):
        # a figure on an older GPU, or none on a newer one, is a wrong row or a wrong capability.
        expectation(
            "expect_column_values_to_be_in_set",
            column="fp8_given_iff_capable",
            value_set=[True],
            meta=examples_from("gpu"),
        ),
        expectation(
            "expect_column_values_to_be_in_set",
            column="fp4_only_if_capable",
            value_set=[True],
            meta=examples_from("gpu"),
        ),
        # Halving the precision never lowers the peak: FP8 at least the dense FP16 figure.
        between("fp8_over_fp16", 1, None, meta=examples_from("gpu")),
        # FP32 accumulation runs at the FP16-accumulate rate or at half of it (GeForce cards).
        between("fp32acc_over_fp16", MIN_FP32ACC_OVER_FP16, 1, meta=examples_from("gpu")),
        # A stated tensor peak is SMs x clock x the architecture's rate (data/tensor_rates.csv)
        # within PEAK_TOLERANCE, save the figures tensor_rates.SHEET_EXCEPTIONS names.
        expectation(
            "expect_column_values_to_be_in_set",
            column="peaks_agree_with_architecture",
            value_set=[True],
            meta={**examples_from("gpu"), "tolerance": PEAK_TOLERANCE},
        ),
        between(
            "tensor_clock_over_boost",
            MIN_TENSOR_CLOCK_OVER_BOOST,
            1,
            meta=examples_from("gpu"),
        ),
        # Where the sheet gives the memory bus and its data rate, bandwidth = bits / 8 x Gbps.
        between(
            "bandwidth_over_bus_rate",
            1 - BANDWIDTH_TOLERANCE,
            1 + BANDWIDTH_TOLERANCE,
            meta=examples_from("gpu"),
        ),
        expectation(
            "expect_column_values_to_be_in_set", column="interconnect", value_set=INTERCONNECTS
        ),
        expectation("expect_column_values_to_be_in_set", column="vendor", value_set=GPU_VENDORS),
        expectation(
            "expect_column_values_to_be_in_set", column="memory_type", value_set=MEMORY_TYPES
        ),
    ]


def llm_expectations() -> list[dict[str, Any]]:
    """Return the LLM catalogue's expectations."""
    text = ("model", "family", "arch", "dtype")
    return [
        *exists(LLM_REQUIRED_COLUMNS),
        *text_types((*text, "aliases")),
        *numeric_types(LLM_REQUIRED_NUMERIC),
        expectation("expect_column_values_to_be_unique", column="model"),
        *not_null((*text, *LLM_REQUIRED_NUMERIC), ("model",)),
        *[between(c, lo, hi) for c, lo, hi in LLM_RANGES],
        between("active_params_b", 0, None, strict_min=True),
        between("active_params_fraction", 0, 1, strict_min=True, meta=examples_from("model")),
        expectation(
            "expect_column_values_to_be_in_set",
            column="hidden_size_mod_heads",
            value_set=[0],
            meta=examples_from("model"),
        ),
        expectation(
            "expect_column_values_to_be_in_set",
            column="heads_mod_kv_heads",
            value_set=[0],
            meta=examples_from("model"),
        ),
        expectation("expect_column_values_to_be_in_set", column="dtype", value_set=LLM_DTYPES),
        expectation("expect_column_values_to_be_in_set", column="arch", value_set=LLM_ARCHS),
        expectation(
            "expect_column_values_to_be_in_set", column="attention", value_set=LLM_ATTENTION
        ),
        expectation(
            "expect_column_values_to_be_in_set",
            column="weight_format",
            value_set=list(KNOWN_FORMATS),
        ),
        between("num_experts", 1, None),
        between("moe_intermediate_size", 1, None),
        *[between(c, 1, None) for c in LLM_ATTENTION_COLUMNS],
        between("shared_experts", 0, None),
        between("experts_per_expert_count", 0, 1, strict_min=True, meta=examples_from("model")),
    ]


def measurement_expectations() -> list[dict[str, Any]]:
    """Return the measurement table's expectations (optional columns may be blank)."""
    return [
        *exists(REQUIRED_COLUMNS),
        *text_types(("gpu", "model", "scenario")),
        *numeric_types(MEASUREMENT_NUMERIC),
        # A row may measure power only or ITL only (ML.ENERGY's server files have no tokens),
        # but it must measure something.
        *not_null(("gpu", "model", "scenario"), ("gpu", "model")),
        expectation(
            "expect_column_values_to_be_in_set",
            column="has_measurement",
            value_set=[True],
            meta=examples_from("gpu", "model"),
        ),
        expectation(
            "expect_column_values_to_be_in_set", column="scenario", value_set=list(SCENARIOS)
        ),
        between("mean_power_w", 0, None, strict_min=True),
        between(
            "power_over_tdp",
            None,
            MAX_POWER_OVER_TDP,
            meta=examples_from("gpu", "mean_power_w"),
        ),
        between("itl_s", 0, MAX_ITL_S, strict_min=True, strict_max=True),
        between("ttft_s", 0, MAX_TTFT_S, strict_min=True, strict_max=True),
        # the measured tails: positive, within the medians' bounds, and p99 >= p90 >= median
        *[between(c, 0, TAIL_MAXIMA[c], strict_min=True, strict_max=True) for c in TAIL_COLUMNS],
        holds("tails_ordered", "gpu", "model"),
        *[between(c, lo, None) for c, lo in MEASUREMENT_MINIMA],
        # up to a GB200 NVL72 rack (one NVLink domain of 72 GPUs)
        between("num_gpus", 1, 72),
        between("engine_year", 2000, 2100),
        expectation(
            "expect_column_values_to_be_in_set",
            column="gpu_resolves",
            value_set=[True],
            meta=examples_from("gpu"),
        ),
        expectation(
            "expect_column_values_to_be_in_set",
            column="model_resolves",
            value_set=[True],
            meta=examples_from("model"),
        ),
        # the harness a row names must be one the simulation knows (data/clients.csv)
        holds("client_known", "client"),
        # an offline row was never driven by an open loop of arrivals
        holds("client_fits_scenario", "client", "scenario"),
        # a closed loop or rounds name their users, a Poisson client its rate, a batch its size
        holds("client_has_its_load", "client"),
        # the simulation schedules a row by its engine's line (data/engine_lines.csv)
        holds("engine_has_line", "engine"),
    ]


def build_suites() -> dict[str, dict[str, Any]]:
    """Return the suites of ``TABLES`` as keyword dictionaries for ``gx.ExpectationSuite``."""
    builders = {
        "gpus": gpu_expectations,
        "llms": llm_expectations,
        "measurements": measurement_expectations,
        "engine_lines": engine_line_expectations,
        "clients": client_expectations,
        "length_distributions": length_expectations,
    }
    return {table: {"name": table, "expectations": build()} for table, build in builders.items()}


def derive_gpu_checks(frame: pd.DataFrame, rates: pd.DataFrame | None = None) -> pd.DataFrame:
    """Return a copy of the GPU table with the derived check columns added.

    ``boost_over_base_clock`` = boost / base clock; ``fp8_given_iff_capable`` says an FP8 figure
    is given exactly when the compute capability has FP8 tensor cores; ``fp4_only_if_capable``
    that an FP4 figure is given only when it has FP4 ones (thresholds from
    ``catalog.KERNEL_FEATURES``); ``fp8_over_fp16`` = FP8 / FP16 dense tensor peak (blank where
    either is blank); ``bandwidth_over_bus_rate`` = bandwidth / (bus bits / 8 x data rate), blank
    where the sheet gives no bus or rate; ``names_its_own`` (see ``names_its_own``);
    ``peaks_agree_with_architecture`` (see ``tensor_rates.peaks_agree``; ``rates`` defaults to
    the shipped ``data/tensor_rates.csv``); ``tensor_clock_over_boost`` = tensor / boost clock.
    Absent optional columns (throughput, links, memory bus, tensor clock) are added as blanks.
    """
    out = frame.reset_index(drop=True)
    optional = (*GPU_THROUGHPUT_COLUMNS, *GPU_LINK_COLUMNS, *GPU_MEMORY_BUS_COLUMNS)
    for column in (*optional, "interconnect", "tensor_clock_mhz"):
        if column not in out.columns:
            out[column] = np.nan
    boost, base = numeric(out, "boost_clock_mhz"), numeric(out, "base_clock_mhz")
    out["boost_over_base_clock"] = boost / base
    capability = numeric(out, "compute_capability")
    fp8, fp4 = numeric(out, "fp8_tensor_tflops"), numeric(out, "fp4_tensor_tflops")
    out["fp8_given_iff_capable"] = (fp8.notna() == (capability >= KERNEL_FEATURES["fp8"])).astype(
        bool
    )
    out["fp4_only_if_capable"] = (fp4.isna() | (capability >= KERNEL_FEATURES["fp4"])).astype(bool)
    out["fp8_over_fp16"] = fp8 / numeric(out, "fp16_tensor_tflops")
    out["fp32acc_over_fp16"] = numeric(out, "fp32acc_tensor_tflops") / numeric(
        out, "fp16_tensor_tflops"
    )
    bus_rate = numeric(out, "memory_bus_bits") / 8 * numeric(out, "memory_data_rate_gbps")
    out["bandwidth_over_bus_rate"] = numeric(out, "memory_bandwidth_gb_s") / bus_rate
    out["names_its_own"] = names_its_own(out)
    out["peaks_agree_with_architecture"] = peaks_agree(
        out, read_tensor_rates() if rates is None else rates
    )
    out["tensor_clock_over_boost"] = numeric(out, "tensor_clock_mhz") / boost
    return out


def names_its_own(gpus: pd.DataFrame) -> pd.Series:
    """Per row, whether none of its names (``gpu`` and ``aliases``) is another GPU's name.

    Names are compared after ``normalise_name``, as the resolver compares them. A name the row
    repeats among its own aliases is no conflict, nor is a ``gpu`` written twice (the uniqueness
    expectation reports that).
    """
    blank = pd.Series(np.nan, index=gpus.index, dtype=object)
    keys = gpus.get("gpu", blank)
    spellings = [
        {normalise_name(n) for n in _names(key, aliases)} - {""}
        for key, aliases in zip(keys, gpus.get("aliases", blank), strict=True)
    ]
    owners: dict[str, set[str]] = defaultdict(set)
    for key, own in zip(keys.astype(str), spellings, strict=True):
        for spelling in own:
            owners[spelling].add(key)
    return pd.Series(
        [all(len(owners[s]) == 1 for s in own) for own in spellings], index=gpus.index, dtype=bool
    )


def _names(key: object, aliases: object) -> list[str]:
    """A row's canonical name and its ``|``-separated aliases (none where blank)."""
    given = [key] if pd.notna(key) else []
    if pd.notna(aliases):
        given += str(aliases).split("|")
    return [str(name) for name in given]


def derive_llm_checks(frame: pd.DataFrame) -> pd.DataFrame:
    """Return a copy of the LLM table with the derived check columns added.

    ``active_params_fraction`` = active / total parameters; ``hidden_size_mod_heads`` =
    hidden_size % num_attention_heads; ``heads_mod_kv_heads`` = num_attention_heads % num_kv_heads;
    ``experts_per_expert_count`` = experts_per_token / num_experts (blank where an input is
    blank or the divisor is zero). Absent optional columns (``LLM_OPTIONAL_COLUMNS``) are added
    as blanks.
    """
    out = frame.reset_index(drop=True)
    for column in LLM_OPTIONAL_COLUMNS:
        if column not in out.columns:
            out[column] = np.nan
    out["experts_per_expert_count"] = numeric(out, "experts_per_token") / numeric(
        out, "num_experts"
    )
    heads = numeric(out, "num_attention_heads")
    kv_heads = numeric(out, "num_kv_heads")
    out["active_params_fraction"] = numeric(out, "active_params_b") / numeric(out, "params_b")
    out["hidden_size_mod_heads"] = numeric(out, "hidden_size") % heads.replace(0, np.nan)
    out["heads_mod_kv_heads"] = heads % kv_heads.replace(0, np.nan)
    return out


def derive_measurement_checks(
    frame: pd.DataFrame,
    catalog: Catalog,
    clients: Mapping[str, str] | None = None,
    engines: Iterable[str] | None = None,
) -> pd.DataFrame:
    """Return a copy of the measurement table with the derived check columns added.

    Optional columns that are absent are added as blanks (as ``read_measurements`` does).
    ``gpu_resolves`` / ``model_resolves`` say whether the name resolves through the catalogue;
    ``power_over_tdp`` is ``mean_power_w`` over the resolved GPU's ``tdp_w`` (blank when the GPU
    does not resolve); ``has_measurement`` says the row holds a power or an ITL.
    Of the harness (``clients``: client -> kind, default the shipped ``clients.csv``'s):
    ``client_known``: the ``client`` is blank or listed; ``client_fits_scenario``: an offline row's
    client is not a Poisson one; ``client_has_its_load``: a ``closed`` or ``rounds`` client's row
    gives its users (``concurrency``, or ``batch_size`` for a loop of batches), a ``poisson``
    one's its ``request_rate_rps`` and a ``batch`` one's its ``batch_size`` (a blank client gets
    the one its load implies, so it passes). ``engine_has_line``: the ``engine`` is blank or has
    a line in ``engines`` (default: the shipped ``engine_lines.csv``'s engines).
    ``tails_ordered``: the median, p90 and p99 of TTFT, and of ITL, do not decrease (a pair
    with a blank passes).
    """
    out = frame.reset_index(drop=True)
    for column in OPTIONAL_COLUMNS:
        if column not in out.columns:
            out[column] = np.nan
    blank = pd.Series(None, index=out.index, dtype=object)
    gpus = out["gpu"] if "gpu" in out.columns else blank
    models = out["model"] if "model" in out.columns else blank
    canonical_gpu = gpus.map(lambda n: catalog.find_gpu(n) if pd.notna(n) else None)
    canonical_llm = models.map(lambda n: catalog.find_llm(n) if pd.notna(n) else None)
    out["gpu_resolves"] = canonical_gpu.notna().astype(bool)
    out["model_resolves"] = canonical_llm.notna().astype(bool)
    tdp = pd.to_numeric(canonical_gpu.map(catalog.gpus["tdp_w"]), errors="coerce").astype(float)
    out["power_over_tdp"] = numeric(out, "mean_power_w") / tdp
    out["has_measurement"] = (
        numeric(out, "mean_power_w").notna() | numeric(out, "itl_s").notna()
    ).astype(bool)
    kinds = client_kinds() if clients is None else dict(clients)
    out["client_known"] = (out["client"].isna() | out["client"].isin(kinds)).astype(bool)
    kind = out["client"].map(kinds)
    offline = out["scenario"] == "offline" if "scenario" in out.columns else blank.notna()
    out["client_fits_scenario"] = ~(offline & (kind == CLIENT_FOR_LOAD["rate"])).astype(bool)
    users = numeric(out, "concurrency").notna() | numeric(out, "batch_size").notna()
    load = {
        "closed": users,
        "rounds": users,
        "poisson": numeric(out, "request_rate_rps").notna(),
        "batch": numeric(out, "batch_size").notna(),
    }
    has_load = pd.Series(True, index=out.index)
    for name, given in load.items():
        has_load &= (kind != name) | given
    out["client_has_its_load"] = has_load.astype(bool)
    lined = set(engine_lines().table["engine"]) if engines is None else set(engines)
    out["engine_has_line"] = (out["engine"].isna() | out["engine"].isin(lined)).astype(bool)
    out["tails_ordered"] = tails_ordered(out)
    return out


def tails_ordered(frame: pd.DataFrame) -> pd.Series:
    """Per row, whether no percentile of a latency lies below a lower one (blanks pass)."""
    ordered = pd.Series(True, index=frame.index)
    for columns in TAIL_ORDER:
        for i, low in enumerate(columns):
            for high in columns[i + 1 :]:
                ordered &= ~(numeric(frame, low) > numeric(frame, high))
    return ordered.astype(bool)
