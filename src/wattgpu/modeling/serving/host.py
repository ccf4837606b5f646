"""An engine line's host time per step, fitted on measured rows against their simulation.

A step's wall time is the GPUs' time plus the engine's host time, ``fixed + per_seq x
sequences`` (``step.HostTime``). ``data/engine_lines.csv`` guesses both per line (its fixed part
with a share per extra shard and per layer, where the engine has one); no source measured them.
Fitted here per line from rows simulated without any host time: what a row measured beyond its
simulation is the host's part of it, ``scale x the table's fixed part + per_seq x the decode
batch`` the simulation ran, non-negative least squares on the gap relative to the measurement
(a slow row weighs as much as a fast one). A line with fewer than ``MIN_HOST_ROWS`` rows keeps
the table's guess. Pure; the rows then carry their host time as ``HOST_COLUMNS``
(``workload.setup`` reads them over the table's).
"""

from __future__ import annotations

import numpy as np

# Rows a line needs before its host time is fitted (two fix both terms, exactly).
MIN_HOST_ROWS = 2
HOST_COLUMNS = ("host_fixed_s", "host_per_seq_s")


def fit_host_time(
    lines: np.ndarray,
    measured: np.ndarray,
    host_free: np.ndarray,
    table_fixed: np.ndarray,
    batch: np.ndarray,
) -> dict[str, tuple[float, float]]:
    """Per engine line, ``(scale on the table's fixed part, per_seq s)``, from its rows.

    Args:
        lines: each row's engine release line.
        measured: each row's measured time per token, s.
        host_free: the same statistic of the row simulated without host time, s.
        table_fixed: the table's fixed host time per step of the row, s.
        batch: the mean decode batch of the simulation, sequences.

    """
    # imported here: a query on the simulated prior reads fitted host times, never fits one, and
    # SciPy's optimisers would cost it 0.45 s of imports
    from scipy.optimize import nnls

    usable = np.isfinite(measured) & np.isfinite(host_free) & np.isfinite(batch) & (measured > 0)
    fitted = {}
    for line in np.unique(lines[usable]):
        mine = usable & (lines == line)
        if mine.sum() < MIN_HOST_ROWS:
            continue
        weight = 1.0 / measured[mine]  # relative: each row's gap over what it measured
        design = np.column_stack([table_fixed[mine], batch[mine]]) * weight[:, None]
        (scale, per_seq), _ = nnls(design, (measured[mine] - host_free[mine]) * weight)
        fitted[str(line)] = (float(scale), float(per_seq))
    return fitted


def host_columns(
    lines: np.ndarray, fitted: dict[str, tuple[float, float]], table_fixed: np.ndarray
) -> dict[str, np.ndarray]:
    """``HOST_COLUMNS`` of rows on ``lines``: a fitted line's host time, NaN (the table's) else."""
    out = {name: np.full(len(lines), np.nan) for name in HOST_COLUMNS}
    for line, (scale, per_seq) in fitted.items():
        mine = lines == line
        out["host_fixed_s"][mine] = scale * table_fixed[mine]
        out["host_per_seq_s"][mine] = per_seq
    return out


def without_host(n: int) -> dict[str, np.ndarray]:
    """``HOST_COLUMNS`` of ``n`` rows that run with no host time at all."""
    return {name: np.zeros(n) for name in HOST_COLUMNS}
