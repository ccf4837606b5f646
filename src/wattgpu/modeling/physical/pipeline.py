"""The physical layer as one pass: workload -> operations -> costs -> step -> serving -> targets.

One function per arrow, one module per stage::

    workload.workload        rows made whole: catalogue specs, workload defaults, engine year
    sizes.sized              the sizes the step's operations are built from: weights, KV cache,
                             kernel path, memory left (``operations.describe_step`` reads them)
    itl.with_statistic       which ITL statistic a measured row reports
    prior_columns.prior_columns
        regimes.serving_model_columns   serving: batches, Little's law, closed loops
            operations.describe_step    the step's work
            costs.step_costs            its cost on the rows' GPUs
            step.step_time              one decode step
        the prior answers the targets are relative to (``targets``)

``physical_columns`` runs them once for a batch of rows; ``features.build_features`` asks it
once and keeps the learning features.
"""

from __future__ import annotations

from wattgpu.data.catalog import Catalog
from wattgpu.modeling.physical import physics
from wattgpu.modeling.physical.columns import Columns
from wattgpu.modeling.physical.itl import with_statistic
from wattgpu.modeling.physical.prior_columns import prior_columns
from wattgpu.modeling.physical.sizes import sized
from wattgpu.modeling.physical.workload import workload


def physical_columns(
    columns: Columns,
    catalog: Catalog | None = None,
    constants: physics.PhysicalConstants = physics.DEFAULT_CONSTANTS,
) -> Columns:
    """Every physical column of a batch of rows, in one pass through the stages.

    ``catalog``: where the rows' GPU and LLM specs come from (``None``: the rows carry them).
    """
    rows = workload(columns, catalog)
    rows = with_statistic(sized(rows))
    return prior_columns(rows, constants)
