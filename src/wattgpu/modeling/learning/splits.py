"""Train/test splits: grouped CV, leave-one-GPU-out and leave LLMs out (one, or blocks of them)."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np
import pandas as pd
from sklearn.model_selection import GroupKFold, LeaveOneGroupOut

from wattgpu.errors import ConfigError

SPLITS = ("CV", "LOGO", "LOLO")
# Unseen LLMs at the cost of a few fits (leave-one-LLM-out costs one per LLM): the LLMs, grouped
# by architecture, cut into blocks. The main job's LOLO and the nested LOLO's inner studies.
LLM_BLOCKS = "LLM-blocks"
# The config fields that make two LLM names one architecture (a fine-tune and its base model,
# the same checkpoint under two ids): such twins are held out together, never split.
ARCHITECTURE_COLUMNS = (
    "llm_params_b",
    "llm_num_layers",
    "llm_hidden_size",
    "llm_num_attention_heads",
    "llm_num_kv_heads",
    "llm_intermediate_size",
    "llm_vocab_size",
)


@dataclass(frozen=True)
class Folds:
    """How many folds the grouped splits cut the rows into (a recipe's choice)."""

    cv: int
    llm_blocks: int


# Folds of a split asked for without a recipe (the full recipe's).
DEFAULT_FOLDS = Folds(cv=5, llm_blocks=10)


def architecture_groups(frame: pd.DataFrame) -> np.ndarray:
    """One label per row naming its LLM's architecture (its model id without the config)."""
    columns = [c for c in ARCHITECTURE_COLUMNS if c in frame.columns]
    if not columns:
        return frame["model"].astype(str).to_numpy()
    key = frame[columns].astype(float).round(3).astype(str)
    return key.agg("\x1f".join, axis=1).to_numpy()


def split_indices(
    frame: pd.DataFrame, split: str, seed: int = 0, folds: Folds | None = None
) -> Iterator[tuple[np.ndarray, np.ndarray]]:
    """Yield (train, test) positional indices for ``split``.

    CV: ``folds.cv`` folds grouped by (model, GPU), so repeats of one configuration never
    straddle train and test; LOGO: one fold per GPU; LOLO: one fold per LLM; ``LLM_BLOCKS``:
    ``folds.llm_blocks`` folds of LLMs grouped by architecture.
    """
    folds = folds or DEFAULT_FOLDS
    if split == "CV":
        groups = (frame["model"].astype(str) + "\x1f" + frame["gpu"].astype(str)).to_numpy()
        yield from _grouped_k_fold(frame, groups, folds.cv, seed, "CV", "(model, GPU) groups")
    elif split == LLM_BLOCKS:
        groups = architecture_groups(frame)
        yield from _grouped_k_fold(frame, groups, folds.llm_blocks, seed, split, "architectures")
    elif split in ("LOGO", "LOLO"):
        groups = frame["gpu" if split == "LOGO" else "model"].astype(str).to_numpy()
        if len(np.unique(groups)) < 2:
            raise ConfigError(
                f"{split} needs at least 2 distinct groups; got {len(np.unique(groups))}"
            )
        yield from LeaveOneGroupOut().split(frame, groups=groups)
    else:
        raise ConfigError(f"split must be one of {', '.join((*SPLITS, LLM_BLOCKS))}; got {split!r}")


def _grouped_k_fold(
    frame: pd.DataFrame, groups: np.ndarray, k: int, seed: int, split: str, what: str
) -> Iterator[tuple[np.ndarray, np.ndarray]]:
    n_groups = len(np.unique(groups))
    if n_groups < 2:
        raise ConfigError(f"{split} needs at least 2 {what}; got {n_groups}")
    kfold = GroupKFold(n_splits=min(k, n_groups), shuffle=True, random_state=seed)
    yield from kfold.split(frame, groups=groups)


def fold_labels(frame: pd.DataFrame, split: str, seed: int = 0) -> np.ndarray:
    """The number of the fold whose test side holds each row (positional)."""
    labels = np.full(len(frame), -1)
    for number, (_, test) in enumerate(split_indices(frame, split, seed=seed)):
        labels[test] = number
    return labels
