"""The GPU and LLM catalogues, and name resolution through their aliases and families.

Names are compared after normalisation (lower case; letters, digits and dots only), so
"NVIDIA A100-SXM4-40GB", "nvidia a100 sxm4 40gb" and "NVIDIA_A100_SXM4_40GB" are one name, while
the dot keeps "opt-1.3b" and "opt-13b" apart. ``Catalog.match`` is the one resolver
(:mod:`wattgpu.data.names`): data files use its exact step (``find_gpu``/``find_llm``), queries
and the recommendation the whole of it (``resolve_gpu``/``resolve_llm``, or ``match``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from wattgpu.arrays import unique_codes
from wattgpu.data.kernels import (
    KERNELS_FILE,
    MODELLED_COLUMNS,
    profiled,
    read_kernels,
    spec_efficiencies,
    with_efficiencies,
)
from wattgpu.data.names import GPU_TIERS, NameIndex, NameMatch, normalise_name
from wattgpu.data.vendors import other_vendor_problem
from wattgpu.errors import DataError, UnknownNameError

__all__ = ["Catalog", "NameMatch", "SpecArrays", "kernel_features", "normalise_name"]

GPU_NUMERIC_COLUMNS = (
    "release_year",
    "memory_gb",
    "memory_bandwidth_gb_s",
    "fp16_tensor_tflops",
    "fp32_tflops",
    "tdp_w",
    "base_clock_mhz",
    "boost_clock_mhz",
    "sm_count",
    "l2_cache_mb",
    "transistors_m",
    "process_nm",
)
GPU_TEXT_COLUMNS = ("vendor", "architecture", "form_factor", "memory_type")
GPU_COLUMNS = ("gpu", "aliases", *GPU_TEXT_COLUMNS, *GPU_NUMERIC_COLUMNS, "compute_capability")
# Dense tensor throughput per number format beside fp16_tensor_tflops: blank where the GPU has
# no such tensor format or its sheet gives no figure; a catalogue may leave them out (blank).
GPU_THROUGHPUT_COLUMNS = (
    "fp32acc_tensor_tflops",  # 16-bit math with FP32 accumulation: half the FP16 figure on GeForce
    "fp8_tensor_tflops",
    "fp4_tensor_tflops",
    "int8_tensor_tops",
    "int4_tensor_tops",
)
# Kernel features serving engines depend on, each the least compute capability that has it
# (CUDA's tables; FlashAttention-2-class fused attention needs SM80, so Volta and Turing fall back
# to slower attention in vLLM/TGI). They are derived, not stored: each follows from
# compute_capability alone, so a stored copy could only disagree with it. They reach the
# features as gpu_bf16, gpu_fp8, gpu_fp4 and gpu_fused_attention (see ``kernel_features``).
# How a GPU reaches its peers (``interconnect``: NVLink or PCIe), from vendor sheets; blank where
# a catalogue leaves them out. A PCIe card's optional NVLink bridge is not assumed.
GPU_LINK_COLUMNS = ("nvlink_bandwidth_gb_s", "pcie_generation", "pcie_lanes")
# The memory interface where the sheet gives it (bits, and Gbps per pin): validation checks that
# the bandwidth is bus / 8 x rate; blank where a catalogue leaves them out.
GPU_MEMORY_BUS_COLUMNS = ("memory_bus_bits", "memory_data_rate_gbps")
KERNEL_FEATURES = {"bf16": 8.0, "fp8": 8.9, "fp4": 10.0, "fused_attention": 8.0}

LLM_NUMERIC_COLUMNS = (
    "params_b",
    "active_params_b",
    "num_layers",
    "num_kv_layers",
    "hidden_size",
    "num_attention_heads",
    "num_kv_heads",
    "head_dim",
    "intermediate_size",
    "vocab_size",
    "max_position_embeddings",
)
LLM_TEXT_COLUMNS = ("family", "arch", "dtype")
LLM_COLUMNS = ("model", "aliases", *LLM_TEXT_COLUMNS, *LLM_NUMERIC_COLUMNS)
# Mixture-of-experts and checkpoint columns a catalogue may leave out or blank: a dense LLM
# (no experts), its checkpoint in its config's ``dtype``. ``moe_intermediate_size``: one routed
# expert's MLP width (``intermediate_size`` is the config's own field, the dense MLP's).
LLM_MOE_COLUMNS = ("num_experts", "experts_per_token", "shared_experts", "moe_intermediate_size")
# What the KV cache of the attention kinds needs, blank where it does not apply (the
# ``attention`` column names the kind): MLA caches a latent of ``kv_lora_rank`` plus
# ``qk_rope_head_dim`` per token and layer; ``num_sliding_layers`` layers keep only the last
# ``sliding_window`` tokens; ``num_linear_layers`` layers (linear attention) keep a fixed-size
# state. ``num_kv_layers`` is the number of layers that keep a full-length KV cache.
LLM_ATTENTION_COLUMNS = (
    "kv_lora_rank",
    "qk_rope_head_dim",
    "sliding_window",
    "num_sliding_layers",
    "num_linear_layers",
)


def _read_csv(path: Path, required: tuple[str, ...], table: str) -> pd.DataFrame:
    if not Path(path).is_file():
        raise DataError(
            f"{table} file not found: {path} (expected a CSV with columns {', '.join(required)})"
        )
    try:
        frame = pd.read_csv(path)
    except (pd.errors.ParserError, UnicodeDecodeError, pd.errors.EmptyDataError) as exc:
        raise DataError(f"{table} file {path} is not a readable CSV: {exc}") from None
    missing = [c for c in required if c not in frame.columns]
    if missing:
        raise DataError(f"{table} file {path} lacks column(s) {', '.join(missing)}")
    return frame


def kernel_features(compute_capability: pd.Series) -> pd.DataFrame:
    """The kernel features (``KERNEL_FEATURES``) each GPU has, from its compute capability.

    One boolean column per feature; blank (``None``) where the compute capability is blank.
    """
    capability = pd.to_numeric(compute_capability, errors="coerce")
    known = capability.notna()
    return pd.DataFrame(
        {
            feature: (capability >= least).astype(object).where(known, None)
            for feature, least in KERNEL_FEATURES.items()
        },
        index=compute_capability.index,
    )


@dataclass(frozen=True)
class SpecArrays:
    """One table's spec columns (``gpu_*`` or ``llm_*``) as arrays, looked up by row number.

    Attributes:
        rows: canonical name -> row number.
        arrays: column -> one value per row (float for numbers, object for text).
        blocks: the same columns stacked by dtype, one ``(columns, rows)`` array each with the
            names of its columns, so that a lookup takes every column of a dtype at once.

    """

    rows: dict[str, int]
    arrays: dict[str, np.ndarray]
    blocks: tuple[tuple[tuple[str, ...], np.ndarray], ...] = field(default=(), repr=False)

    @classmethod
    def from_frame(cls, frame: pd.DataFrame, key: str, prefix: str) -> SpecArrays:
        """The spec columns of ``frame`` (all but ``key`` and ``aliases``), prefixed once."""
        specs = frame.drop(columns=[key, "aliases"]).add_prefix(prefix)
        rows = {str(name): number for number, name in enumerate(frame[key])}
        arrays = {
            column: values.to_numpy(dtype=float)
            if pd.api.types.is_numeric_dtype(values) and not pd.api.types.is_bool_dtype(values)
            else values.to_numpy(dtype=object)
            for column, values in specs.items()
        }
        by_dtype: dict[np.dtype, list[str]] = {}
        for column, values in arrays.items():
            by_dtype.setdefault(values.dtype, []).append(column)
        blocks = tuple(
            (tuple(columns), np.stack([arrays[c] for c in columns]))
            for columns in by_dtype.values()
        )
        return cls(rows, arrays, blocks)

    def take(
        self, names: np.ndarray, columns: tuple[str, ...] | None = None
    ) -> dict[str, np.ndarray]:
        """Each column's (or each of ``columns``') values for canonical ``names``.

        NaN for a name not in the table.
        """
        codes, uniques = unique_codes(names)
        found = np.array([self.rows.get(str(u), -1) for u in uniques], dtype=np.intp)[codes]
        missing = found < 0
        if missing.any():
            found = np.where(missing, 0, found)
        else:
            missing = None
        if columns is not None:
            return {c: _take(self.arrays[c], found, missing) for c in columns}
        taken = {}
        for labels, block in self.blocks:
            taken.update(zip(labels, _take(block, found, missing), strict=True))
        return {c: taken[c] for c in self.arrays}


def _take(values: np.ndarray, rows: np.ndarray, missing: np.ndarray | None) -> np.ndarray:
    """``values``' entries (along the last axis) at ``rows``, NaN where ``missing``."""
    taken = values.take(rows, axis=-1)
    if missing is not None:
        taken[..., missing] = np.nan
    return taken


@dataclass(frozen=True, eq=False)
class Catalog:
    """Both catalogues, their spec arrays and their name indexes (build with ``from_frames``).

    Attributes:
        gpus: one row per GPU, indexed by canonical name.
        llms: one row per LLM, indexed by Hugging Face id.
        gpu_specs: the GPU spec columns (``gpu_*``) as arrays, for features.
        llm_specs: the LLM spec columns (``llm_*``) as arrays, for features.
        gpu_names: GPU names and aliases, and how a name resolves through them.
        llm_names: LLM ids and aliases, and how a name resolves through them.

    """

    gpus: pd.DataFrame
    llms: pd.DataFrame
    gpu_specs: SpecArrays = field(repr=False)
    llm_specs: SpecArrays = field(repr=False)
    gpu_names: NameIndex = field(repr=False)
    llm_names: NameIndex = field(repr=False)

    @classmethod
    def from_frames(
        cls, gpus: pd.DataFrame, llms: pd.DataFrame, kernels: pd.DataFrame | None = None
    ) -> Catalog:
        """Build a catalogue from the two tables (columns as in ``data/*.csv``).

        ``kernels``: the tidy kernel table (``data/kernels.csv``), which gives the profiled GPUs
        their measured efficiencies; every other GPU gets them from its specs
        (:mod:`wattgpu.data.kernels`). Without it, efficiencies a snapshot carries are kept.
        """
        gpus = gpus.copy()
        llms = llms.copy()
        for frame, key, table in ((gpus, "gpu", "gpus"), (llms, "model", "llms")):
            dupes = frame[key][frame[key].duplicated()].tolist()
            if dupes:
                raise DataError(f"{table}: duplicate {key} {dupes[0]!r}; each must be unique")
        stored = [c for c in KERNEL_FEATURES if c in gpus.columns]
        if stored:
            raise DataError(
                f"gpus: column(s) {', '.join(stored)} are derived from compute_capability; "
                "remove them from the catalogue"
            )
        optional = (*GPU_THROUGHPUT_COLUMNS, *GPU_LINK_COLUMNS, *GPU_MEMORY_BUS_COLUMNS)
        for column in ("compute_capability", *optional):
            if column not in gpus.columns:
                gpus[column] = np.nan
        if "interconnect" not in gpus.columns:
            gpus["interconnect"] = None
        gpus = with_efficiencies(gpus, kernels)
        if "num_kv_layers" not in llms.columns:
            llms["num_kv_layers"] = llms["num_layers"]
        for column in (*LLM_MOE_COLUMNS, *LLM_ATTENTION_COLUMNS):
            if column not in llms.columns:
                llms[column] = np.nan
        given = llms.get("weight_format", pd.Series(np.nan, index=llms.index))
        llms["weight_format"] = given.where(given.notna(), llms["dtype"])
        return cls(
            gpus=gpus.set_index("gpu", drop=False),
            llms=llms.set_index("model", drop=False),
            gpu_specs=SpecArrays.from_frame(
                pd.concat([gpus, kernel_features(gpus["compute_capability"])], axis=1),
                "gpu",
                "gpu_",
            ),
            llm_specs=SpecArrays.from_frame(llms, "model", "llm_"),
            gpu_names=NameIndex.from_frame(gpus, "gpu", "GPU", "gpus.csv", GPU_TIERS),
            llm_names=NameIndex.from_frame(llms, "model", "LLM", "llms.csv"),
        )

    @classmethod
    def load(cls, gpus_csv: Path, llms_csv: Path) -> Catalog:
        """Read ``gpus.csv`` and ``llms.csv``, and ``kernels.csv`` beside them where it is."""
        gpus = _read_csv(gpus_csv, GPU_COLUMNS, "GPU catalogue")
        llms = _read_csv(
            llms_csv, tuple(c for c in LLM_COLUMNS if c != "num_kv_layers"), "LLM catalogue"
        )
        kernels_csv = Path(gpus_csv).with_name(KERNELS_FILE)
        kernels = read_kernels(kernels_csv) if kernels_csv.is_file() else None
        return cls.from_frames(gpus, llms, kernels)

    def spec_arrays(
        self, kind: str, names: np.ndarray, columns: tuple[str, ...] | None = None
    ) -> dict[str, np.ndarray]:
        """The ``gpu_*`` (``kind="gpu"``) or ``llm_*`` spec columns for canonical ``names``.

        Numeric columns are float arrays, text ones object arrays; a name that is not a canonical
        one gets NaN in every column. ``columns``: only these (default: all).
        """
        return (self.gpu_specs if kind == "gpu" else self.llm_specs).take(names, columns)

    def modelled_efficiencies(self, specs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        """``gpu_*`` efficiency columns of GPUs described by ``specs`` (``SPEC_MODEL_INPUTS``).

        The spec model of :mod:`wattgpu.data.kernels` over this catalogue's profiled GPUs.
        """
        frame = pd.DataFrame({k: np.asarray(v, dtype=object) for k, v in specs.items()})
        keys = pd.Series(["|".join(map(str, row)) for row in frame.itertuples(index=False)])
        unique = frame[~keys.duplicated().to_numpy()].set_axis(keys[~keys.duplicated()])
        rows = spec_efficiencies(profiled(self.gpus), unique).reindex(keys.to_numpy())
        return {f"gpu_{c}": rows[c].to_numpy(dtype=float) for c in MODELLED_COLUMNS}

    def match(self, kind: str, name: str) -> NameMatch:
        """Resolve a GPU (``kind="gpu"``) or LLM name: the one resolver behind every lookup.

        Exact names and aliases first, then a name's family (one variant: resolved; several:
        listed), else the closest names; see :mod:`wattgpu.data.names`.
        """
        return (self.gpu_names if kind == "gpu" else self.llm_names).match(name)

    def find_gpu(self, name: str) -> str | None:
        """The canonical GPU whose name or alias ``name`` is, or ``None`` (data files: no guess)."""
        return self.gpu_names.find(name)

    def find_llm(self, name: str) -> str | None:
        """The canonical LLM whose id or alias ``name`` is, or ``None`` (data files: no guess)."""
        return self.llm_names.find(name)

    def resolve_gpu(self, name: str, label: str | None = None) -> str:
        """The canonical GPU for ``name`` (see ``match``), or raise ``UnknownNameError``.

        Another vendor's GPU is refused as such (:mod:`wattgpu.data.vendors`). ``label``: what
        the message calls the input (default: ``GPU``).
        """
        return self._resolve("gpu", name, label)

    def resolve_llm(self, name: str, label: str | None = None) -> str:
        """The canonical LLM for ``name`` (see ``match``), or raise ``UnknownNameError``.

        ``label``: what the message calls the input (default: ``LLM``).
        """
        return self._resolve("llm", name, label)

    def _resolve(self, kind: str, name: str, label: str | None) -> str:
        found = self.match(kind, name)
        other = other_vendor_problem(name) if kind == "gpu" else None
        if found.canonical is None and other is not None:
            raise UnknownNameError(label or found.kind, name, other, ())
        if found.canonical is None:
            suggestions = found.family or found.closest
            raise UnknownNameError(label or found.kind, name, found.problem, suggestions)
        return found.canonical
