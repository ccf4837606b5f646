"""Train/test splits: grouped CV, leave-one-GPU-out and leave-one-LLM-out."""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import pandas as pd
from sklearn.model_selection import GroupKFold, LeaveOneGroupOut

from wattgpu.errors import ConfigError

SPLITS = ("CV", "LOGO", "LOLO")
# For tuning only: unseen LLMs at the cost of 5 fits (leave-one-LLM-out costs one per LLM).
LLM_BLOCKS = "LLM-blocks"
CV_FOLDS = 5


def split_indices(
    frame: pd.DataFrame, split: str, seed: int = 0
) -> Iterator[tuple[np.ndarray, np.ndarray]]:
    """Yield (train, test) positional indices for ``split``.

    CV: 5 folds grouped by (model, GPU), so repeats of one configuration never straddle train and
    test; LOGO: one fold per GPU; LOLO: one fold per LLM; ``LLM_BLOCKS``: 5 folds grouped by LLM.
    """
    if split == "CV":
        groups = (frame["model"].astype(str) + "\x1f" + frame["gpu"].astype(str)).to_numpy()
        n_groups = len(np.unique(groups))
        if n_groups < 2:
            raise ConfigError(f"CV needs at least 2 (model, GPU) groups; got {n_groups}")
        folds = GroupKFold(n_splits=min(CV_FOLDS, n_groups), shuffle=True, random_state=seed)
        yield from folds.split(frame, groups=groups)
    elif split == LLM_BLOCKS:
        groups = frame["model"].astype(str).to_numpy()
        n_groups = len(np.unique(groups))
        if n_groups < 2:
            raise ConfigError(f"{split} needs at least 2 LLMs; got {n_groups}")
        folds = GroupKFold(n_splits=min(CV_FOLDS, n_groups), shuffle=True, random_state=seed)
        yield from folds.split(frame, groups=groups)
    elif split in ("LOGO", "LOLO"):
        groups = frame["gpu" if split == "LOGO" else "model"].astype(str).to_numpy()
        if len(np.unique(groups)) < 2:
            raise ConfigError(
                f"{split} needs at least 2 distinct groups; got {len(np.unique(groups))}"
            )
        yield from LeaveOneGroupOut().split(frame, groups=groups)
    else:
        raise ConfigError(f"split must be one of {', '.join(SPLITS)}; got {split!r}")


def fold_labels(frame: pd.DataFrame, split: str, seed: int = 0) -> np.ndarray:
    """The number of the fold whose test side holds each row (positional)."""
    labels = np.full(len(frame), -1)
    for number, (_, test) in enumerate(split_indices(frame, split, seed=seed)):
        labels[test] = number
    return labels
