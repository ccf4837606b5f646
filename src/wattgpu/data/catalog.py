"""The GPU and LLM catalogues, and name resolution through their aliases.

Names are compared after normalisation (lower case; letters, digits and dots only), so
"NVIDIA A100-SXM4-40GB", "nvidia a100 sxm4 40gb" and "NVIDIA_A100_SXM4_40GB" are one name, while
the dot keeps "opt-1.3b" and "opt-13b" apart.
"""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from wattgpu.arrays import unique_codes
from wattgpu.errors import DataError, UnknownNameError

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
GPU_COLUMNS = ("gpu", "aliases", *GPU_TEXT_COLUMNS, *GPU_NUMERIC_COLUMNS)

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


def normalise_name(name: str) -> str:
    """Return the comparison key of a GPU or model name: lower case; letters, digits and dots."""
    return re.sub(r"[^a-z0-9.]", "", str(name).lower())


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


def _alias_index(frame: pd.DataFrame, key: str, table: str) -> dict[str, str]:
    """Map every normalised name and alias to its canonical name, refusing ambiguity."""
    index: dict[str, str] = {}
    for canonical, aliases in zip(frame[key], frame["aliases"].fillna(""), strict=True):
        names = [canonical, *[a for a in str(aliases).split("|") if a.strip()]]
        for name in names:
            norm = normalise_name(name)
            if norm in index and index[norm] != canonical:
                raise DataError(
                    f"{table}: name {name!r} is ambiguous, it names both "
                    f"{index[norm]!r} and {canonical!r}"
                )
            index[norm] = canonical
    return index


@dataclass(frozen=True)
class Catalog:
    """Both catalogues with their alias indexes.

    Attributes:
        gpus: one row per GPU, indexed by canonical name.
        llms: one row per LLM, indexed by Hugging Face id.

    """

    gpus: pd.DataFrame
    llms: pd.DataFrame

    @classmethod
    def from_frames(cls, gpus: pd.DataFrame, llms: pd.DataFrame) -> Catalog:
        """Build a catalogue from the two tables (columns as in ``data/*.csv``)."""
        gpus = gpus.copy()
        llms = llms.copy()
        for frame, key, table in ((gpus, "gpu", "gpus"), (llms, "model", "llms")):
            dupes = frame[key][frame[key].duplicated()].tolist()
            if dupes:
                raise DataError(f"{table}: duplicate {key} {dupes[0]!r}; each must be unique")
        if "num_kv_layers" not in llms.columns:
            llms["num_kv_layers"] = llms["num_layers"]
        catalog = cls(gpus.set_index("gpu", drop=False), llms.set_index("model", drop=False))
        # the spec tables as features want them (gpu_*, llm_*), prefixed once, not per query
        gpu_specs = catalog.gpus.drop(columns=["gpu", "aliases"]).add_prefix("gpu_")
        llm_specs = catalog.llms.drop(columns=["model", "aliases"]).add_prefix("llm_")
        object.__setattr__(catalog, "gpu_specs", gpu_specs)
        object.__setattr__(catalog, "llm_specs", llm_specs)
        # per table: canonical name -> row number, and each spec column as one numpy array, so
        # that features look specs up by position instead of reindexing frames per query
        for name, specs in (("gpu", gpu_specs), ("llm", llm_specs)):
            rows = {str(key): number for number, key in enumerate(specs.index)}
            arrays = {
                column: values.to_numpy(dtype=float)
                if pd.api.types.is_numeric_dtype(values) and not pd.api.types.is_bool_dtype(values)
                else values.to_numpy(dtype=object)
                for column, values in specs.items()
            }
            object.__setattr__(catalog, f"_{name}_rows", rows)
            object.__setattr__(catalog, f"_{name}_arrays", arrays)
        object.__setattr__(catalog, "_gpu_index", _alias_index(gpus, "gpu", "gpus"))
        object.__setattr__(catalog, "_llm_index", _alias_index(llms, "model", "llms"))
        return catalog

    @classmethod
    def load(cls, gpus_csv: Path, llms_csv: Path) -> Catalog:
        """Read ``gpus.csv`` and ``llms.csv``."""
        gpus = _read_csv(gpus_csv, GPU_COLUMNS, "GPU catalogue")
        llms = _read_csv(
            llms_csv, tuple(c for c in LLM_COLUMNS if c != "num_kv_layers"), "LLM catalogue"
        )
        return cls.from_frames(gpus, llms)

    def spec_arrays(self, kind: str, names: np.ndarray) -> dict[str, np.ndarray]:
        """The ``gpu_*`` (``kind="gpu"``) or ``llm_*`` spec columns for canonical ``names``.

        Numeric columns are float arrays, text ones object arrays; a name that is not a canonical
        one gets NaN in every column.
        """
        rows: dict[str, int] = getattr(self, f"_{kind}_rows")
        arrays: dict[str, np.ndarray] = getattr(self, f"_{kind}_arrays")
        codes, uniques = unique_codes(names)
        found = np.array([rows.get(str(u), -1) for u in uniques], dtype=np.intp)[codes]
        missing = found < 0
        out = {}
        for column, values in arrays.items():
            taken = values.take(np.where(missing, 0, found))
            if missing.any():
                taken = taken.copy()
                taken[missing] = np.nan
            out[column] = taken
        return out

    def find_gpu(self, name: str) -> str | None:
        """Return the canonical GPU name for ``name`` or ``None``."""
        return self._gpu_index.get(normalise_name(name))  # type: ignore[attr-defined]

    def find_llm(self, name: str) -> str | None:
        """Return the canonical LLM id for ``name`` or ``None``."""
        return self._llm_index.get(normalise_name(name))  # type: ignore[attr-defined]

    def resolve_gpu(self, name: str) -> str:
        """Return the canonical GPU name, or raise ``UnknownNameError`` with close matches."""
        found = self.find_gpu(name)
        if found is None:
            raise UnknownNameError("GPU", name, self.suggest(name, self.gpus))
        return found

    def resolve_llm(self, name: str) -> str:
        """Return the canonical LLM id, or raise ``UnknownNameError`` with close matches."""
        found = self.find_llm(name)
        if found is None:
            raise UnknownNameError("LLM", name, self.suggest(name, self.llms))
        return found

    @staticmethod
    def suggest(name: str, table: pd.DataFrame, n: int = 3) -> list[str]:
        """Up to ``n`` canonical names whose name or alias is closest to ``name``."""
        candidates = {str(c): str(c) for c in table.index}
        for canonical, aliases in zip(table.index, table["aliases"].fillna(""), strict=True):
            for alias in str(aliases).split("|"):
                if alias.strip():
                    candidates[alias.strip()] = str(canonical)
        lowered = {k.lower(): v for k, v in candidates.items()}
        matches = difflib.get_close_matches(str(name).lower(), list(lowered), n=n * 3, cutoff=0.5)
        return list(dict.fromkeys(lowered[m] for m in matches))[:n]
