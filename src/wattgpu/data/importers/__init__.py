"""Importers of public measurement data: Watt Counts, ML.ENERGY, Argonne, LLM-Pilot, AIConfigurator.

Each importer turns the raw files of one data set into rows of the measurement schema
(:mod:`wattgpu.data.measurements`) and returns them with every row it dropped and why. Nothing
is written here; the CLI writes the CSV. The reasons, in the order they are checked:

1. the raw row cannot be used (e.g. no generated tokens, unreadable request lists, not an
   NVIDIA GPU);
2. ``GPU name does not resolve: NAME`` through the catalogue;
3. ``LLM does not resolve: NAME``;
4. ``weights in a format the project does not know (DTYPE)`` (the known ones:
   :data:`wattgpu.data.formats.BYTES_PER_PARAM`);
5. ``multi-GPU (N GPUs)``, only when single-GPU rows are asked for;
6. ``fails validation: EXPECTATION(COLUMN)`` of the measurement suite.

Mixture-of-experts LLMs and FP8 / MXFP4 / INT4 checkpoints are kept: the catalogue describes
their experts and the row's ``dtype`` its weight format.

Kept rows carry canonical catalogue names in ``gpu``/``model`` and the names exactly as the
source writes them in ``gpu_source_name``/``model_source_name`` (not ``*_as_written``, which
:func:`~wattgpu.data.measurements.resolve_names` overwrites when the file is read back).
Each names the harness it was measured under in ``client`` (a client of ``data/clients.csv``, one
per source generation, from the source's documentation); Watt Counts' rows leave it blank, so
they get the client their load implies (Poisson arrivals at the row's rate, a batch offline).
"""

from wattgpu.data.importers.aiconfigurator import (
    AIC_CLIENT,
    AIC_DISAGG,
    AIC_FAMILY,
    AIC_GPUS,
    AIC_ID_COLUMNS,
    AIC_ITL_KIND,
    AIC_SOURCE,
    import_aiconfigurator,
    read_aiconfigurator,
)
from wattgpu.data.importers.argonne import (
    ARGONNE_CLIENT,
    ARGONNE_ENGINE_YEAR,
    ARGONNE_ENGINES,
    ARGONNE_FILES,
    ARGONNE_ID_COLUMNS,
    ARGONNE_ITL_KIND,
    ARGONNE_MIN_STEP_S,
    ARGONNE_SOURCE,
    import_argonne,
    read_argonne,
)
from wattgpu.data.importers.common import (
    SCHEMA_COLUMNS,
    SIXTEEN_BIT,
    ImportResult,
    summarise,
)
from wattgpu.data.importers.llm_pilot import (
    LLM_PILOT_CLIENT,
    LLM_PILOT_ENGINE_YEAR,
    LLM_PILOT_GPUS,
    LLM_PILOT_ID_COLUMNS,
    LLM_PILOT_ITL_KIND,
    LLM_PILOT_MODEL_IDS,
    LLM_PILOT_SOURCE,
    failure_reason,
    import_llm_pilot,
    read_llm_pilot,
)
from wattgpu.data.importers.mlenergy import (
    ITL_KIND_2023,
    ITL_KIND_V2,
    ITL_KIND_V3,
    MLENERGY_2023_MODEL_IDS,
    MLENERGY_CLIENTS,
    MLENERGY_ID_COLUMNS,
    MLENERGY_SOURCE,
    MLENERGY_V3_TEXT_TASKS,
    import_mlenergy,
    read_mlenergy,
)
from wattgpu.data.importers.watt_counts import (
    WATT_COUNTS_COLUMNS,
    WATT_COUNTS_GPUS,
    WATT_COUNTS_ITL_KIND,
    WATT_COUNTS_LISTS,
    WATT_COUNTS_MOE,
    WATT_COUNTS_SOURCE,
    import_watt_counts,
    parse_list,
    per_request_itl,
    read_watt_counts,
)

__all__ = [
    "AIC_CLIENT",
    "AIC_DISAGG",
    "AIC_FAMILY",
    "AIC_GPUS",
    "AIC_ID_COLUMNS",
    "AIC_ITL_KIND",
    "AIC_SOURCE",
    "ARGONNE_CLIENT",
    "ARGONNE_ENGINE_YEAR",
    "ARGONNE_ENGINES",
    "ARGONNE_FILES",
    "ARGONNE_ID_COLUMNS",
    "ARGONNE_ITL_KIND",
    "ARGONNE_MIN_STEP_S",
    "ARGONNE_SOURCE",
    "ITL_KIND_2023",
    "LLM_PILOT_CLIENT",
    "LLM_PILOT_ENGINE_YEAR",
    "LLM_PILOT_GPUS",
    "LLM_PILOT_ID_COLUMNS",
    "LLM_PILOT_ITL_KIND",
    "LLM_PILOT_MODEL_IDS",
    "LLM_PILOT_SOURCE",
    "ITL_KIND_V2",
    "ITL_KIND_V3",
    "MLENERGY_2023_MODEL_IDS",
    "MLENERGY_CLIENTS",
    "MLENERGY_ID_COLUMNS",
    "MLENERGY_SOURCE",
    "MLENERGY_V3_TEXT_TASKS",
    "SCHEMA_COLUMNS",
    "SIXTEEN_BIT",
    "WATT_COUNTS_COLUMNS",
    "WATT_COUNTS_GPUS",
    "WATT_COUNTS_ITL_KIND",
    "WATT_COUNTS_LISTS",
    "WATT_COUNTS_MOE",
    "WATT_COUNTS_SOURCE",
    "ImportResult",
    "failure_reason",
    "import_aiconfigurator",
    "import_argonne",
    "import_llm_pilot",
    "import_mlenergy",
    "import_watt_counts",
    "parse_list",
    "per_request_itl",
    "read_aiconfigurator",
    "read_argonne",
    "read_llm_pilot",
    "read_mlenergy",
    "read_watt_counts",
    "summarise",
]
