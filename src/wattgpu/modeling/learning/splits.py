"""Train/test splits: grouped CV, leave one GPU, LLM architecture or data source out, LLM blocks."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from wattgpu.errors import ConfigError

SPLITS = ("CV", "LOGO", "LOLO", "LOSO")
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


# The data families a source splits into for leave-one-source-out: one lab's set-up, engine
# generation and method each. ML.ENERGY's rows split by the family their importer wrote
# (``family``, else the parenthesis of ``source``): the 2023 Hugging Face transformers runs and
# the 2024-25 vLLM runs are two set-ups. Any other source is a family of its own, by name.
MLENERGY_FAMILIES = {
    "legacy_hf_bs1_2023": "mlenergy-2023",
    "hf_batch_branch_2023": "mlenergy-2023",
    "v1_server_rate_2024": "mlenergy-2024-25",
    "v2_vllm_batch_2024": "mlenergy-2024-25",
    "v3_vllm_batch_2025": "mlenergy-2024-25",
}
# (the start of a ``source``, its family) for the other shipped and known sources.
SOURCE_PREFIXES = (
    ("argonne", "argonne"),
    ("ibm llm-pilot", "llm-pilot"),
    ("nvidia aiconfigurator", "aiconfigurator"),
)
# The family of a row with no source.
NO_SOURCE = "(no source)"


@dataclass(frozen=True)
class Folds:
    """How many folds the grouped splits cut the rows into (a recipe's choice)."""

    cv: int
    llm_blocks: int


# Folds of a split asked for without a recipe (the full recipe's).
DEFAULT_FOLDS = Folds(cv=5, llm_blocks=10)


def architecture_groups(rows: pd.DataFrame | Mapping[str, Any]) -> np.ndarray:
    """One label per row naming its LLM's architecture (its model id without the config).

    ``rows``: a frame, or feature columns (the served model classifies queries with it).
    """
    columns = [c for c in ARCHITECTURE_COLUMNS if c in rows]
    if not columns:
        return np.asarray(rows["model"], dtype=object).astype(str)
    parts = [np.round(np.asarray(rows[c], dtype=float), 3).astype(str) for c in columns]
    return np.asarray(["\x1f".join(key) for key in zip(*parts, strict=True)], dtype=object)


def source_family(frame: pd.DataFrame) -> np.ndarray:
    """One label per row naming its data family, from its ``source`` (and ``family``) columns.

    ``mlenergy-2023`` and ``mlenergy-2024-25`` (``MLENERGY_FAMILIES``), ``argonne``,
    ``llm-pilot`` and ``aiconfigurator`` (``SOURCE_PREFIXES``); any other source (a generated
    file, a user's own) is its own family, named by its ``source``. Used to split only: no
    feature may name where a row came from.
    """
    n = len(frame)
    sources = _text(frame, "source", n)
    families = _text(frame, "family", n)
    labels = np.empty(n, dtype=object)
    for i, (source, family) in enumerate(zip(sources, families, strict=True)):
        labels[i] = _family_of(source.strip(), family.strip())
    return labels


def _text(frame: pd.DataFrame, column: str, n: int) -> np.ndarray:
    if column not in frame.columns:
        return np.full(n, "", dtype=object)
    return frame[column].astype("object").fillna("").astype(str).to_numpy()


def _family_of(source: str, family: str) -> str:
    lowered = source.lower()
    if lowered.startswith("mlenergy"):
        named = family or (source.rsplit("(", 1)[-1].rstrip(")") if "(" in source else "")
        return MLENERGY_FAMILIES.get(named, source)
    for prefix, label in SOURCE_PREFIXES:
        if lowered.startswith(prefix):
            return label
    return source or NO_SOURCE


def split_groups(frame: pd.DataFrame, split: str) -> np.ndarray:
    """The group label of each row that ``split`` holds out whole.

    LOGO: the GPU; LOLO and ``LLM_BLOCKS``: the LLM's architecture (``architecture_groups``);
    LOSO: the data family (``source_family``); CV: the (LLM, GPU) pair.
    """
    if split == "CV":
        return (frame["model"].astype(str) + "\x1f" + frame["gpu"].astype(str)).to_numpy()
    if split == "LOGO":
        return frame["gpu"].astype(str).to_numpy()
    if split in ("LOLO", LLM_BLOCKS):
        return architecture_groups(frame)
    if split == "LOSO":
        return source_family(frame)
    raise ConfigError(f"split must be one of {', '.join((*SPLITS, LLM_BLOCKS))}; got {split!r}")


def can_split(frame: pd.DataFrame, split: str) -> bool:
    """Whether ``frame`` holds the two groups ``split`` needs (one source: no LOSO)."""
    return len(np.unique(split_groups(frame, split))) >= 2


def split_indices(
    frame: pd.DataFrame, split: str, seed: int = 0, folds: Folds | None = None
) -> Iterator[tuple[np.ndarray, np.ndarray]]:
    """Yield (train, test) positional indices for ``split``.

    CV: ``folds.cv`` folds grouped by (model, GPU), so repeats of one configuration never
    straddle train and test; LOGO: one fold per GPU; LOLO: one fold per LLM architecture
    (``architecture_groups``: one config under two names is held out whole); LOSO: one fold
    per data family (``source_family``); ``LLM_BLOCKS``: ``folds.llm_blocks`` folds of LLMs
    grouped by architecture.
    """
    folds = folds or DEFAULT_FOLDS
    groups = split_groups(frame, split)
    if split == "CV":
        yield from _grouped_k_fold(frame, groups, folds.cv, seed, "CV", "(model, GPU) groups")
    elif split == LLM_BLOCKS:
        yield from _grouped_k_fold(frame, groups, folds.llm_blocks, seed, split, "architectures")
    else:
        if len(np.unique(groups)) < 2:
            raise ConfigError(
                f"{split} needs at least 2 distinct groups; got {len(np.unique(groups))}"
            )
        from sklearn.model_selection import LeaveOneGroupOut

        yield from LeaveOneGroupOut().split(frame, groups=groups)


def _grouped_k_fold(
    frame: pd.DataFrame, groups: np.ndarray, k: int, seed: int, split: str, what: str
) -> Iterator[tuple[np.ndarray, np.ndarray]]:
    n_groups = len(np.unique(groups))
    if n_groups < 2:
        raise ConfigError(f"{split} needs at least 2 {what}; got {n_groups}")
    # imported here: scikit-learn (and the SciPy it loads) costs 0.6 s that asking never needs
    from sklearn.model_selection import GroupKFold

    kfold = GroupKFold(n_splits=min(k, n_groups), shuffle=True, random_state=seed)
    yield from kfold.split(frame, groups=groups)


def fold_labels(frame: pd.DataFrame, split: str, seed: int = 0) -> np.ndarray:
    """The number of the fold whose test side holds each row (positional)."""
    labels = np.full(len(frame), -1)
    for number, (_, test) in enumerate(split_indices(frame, split, seed=seed)):
        labels[test] = number
    return labels
