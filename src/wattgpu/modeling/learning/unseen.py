"""What a query has that the training rows never had: the kind of novelty its interval is for.

A prediction for a GPU the model was trained on is a different promise from one for a GPU
nobody measured, and both differ from one for a set-up (an engine and its release) that no
training row ran. Each kind is calibrated on the residuals of the split that held out that
kind of thing (``SPLIT_OF_KIND``), so an interval is as wide as the errors of its own kind:

- ``measured``: the query's GPU, LLM architecture and set-up were all in the training rows
  (grouped cross-validation's residuals: a measured GPU and LLM, not measured together);
- ``unseen GPU``: its GPU was not (leave-one-GPU-out);
- ``unseen LLM``: its LLM architecture was not, or its LLM was read from a config.json (a match
  of its figures with a trained architecture's is a coincidence of the count's rounding, not a
  measurement) (leave-one-LLM-out, by architecture);
- ``unseen set-up``: its set-up (engine and engine release year) was not, or its GPU was
  measured but never under this set-up (leave-one-source-out: a held-out source's rows are
  of set-ups the other sources never ran, mostly on GPUs they measured).

A query new in several ways gets the widest of their intervals. Pure functions; what the
training rows saw (``Seen``) travels with the served model's interval, so that serving and
every held-out check classify a row alike.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields
from functools import cached_property
from typing import Any

import numpy as np

from wattgpu.arrays import row_codes
from wattgpu.modeling.learning.splits import ARCHITECTURE_COLUMNS, architecture_groups

MEASURED = "measured"
UNSEEN_GPU = "unseen GPU"
UNSEEN_LLM = "unseen LLM"
UNSEEN_SETUP = "unseen set-up"
KINDS = (MEASURED, UNSEEN_GPU, UNSEEN_LLM, UNSEEN_SETUP)
# The split whose held-out residuals calibrate each kind.
SPLIT_OF_KIND = {MEASURED: "CV", UNSEEN_GPU: "LOGO", UNSEEN_LLM: "LOLO", UNSEEN_SETUP: "LOSO"}
# The columns a row's kinds depend on (``setup_labels``, ``architecture_groups``, and a query's
# flag of an LLM read from its config.json).
_KEY_COLUMNS = ("gpu", "model", "engine", "engine_year", "llm_from_config", *ARCHITECTURE_COLUMNS)
# What a kind says in a sentence ("not validated on an unseen GPU").
PHRASE = {
    MEASURED: "a measured GPU and set-up",
    UNSEEN_GPU: "an unseen GPU",
    UNSEEN_LLM: "an unseen LLM",
    UNSEEN_SETUP: "an unseen set-up",
}


def setup_labels(rows: Mapping[str, Any]) -> np.ndarray:
    """Each row's set-up: its engine and the engine's release year (``"vllm 2024"``)."""
    engines = np.asarray(rows["engine"], dtype=object).astype(str)
    years = np.asarray(rows["engine_year"], dtype=float)
    return np.char.add(np.char.add(engines, " "), _year_text(years)).astype(object)


def _year_text(years: np.ndarray) -> np.ndarray:
    return np.where(np.isfinite(years), np.nan_to_num(years).astype(int).astype(str), "?")


@dataclass(frozen=True)
class Seen:
    """The GPUs, LLM architectures and set-ups of a model's training rows.

    ``setups``: the set-ups they ran; ``gpu_setups``: each GPU with each set-up it ran
    (``"GPU|set-up"``).
    """

    gpus: tuple[str, ...]
    architectures: tuple[str, ...]
    setups: tuple[str, ...]
    gpu_setups: tuple[str, ...]

    @classmethod
    def of(cls, rows: Mapping[str, Any]) -> Seen:
        """What the training ``rows`` (with features) hold."""
        gpus = np.asarray(rows["gpu"], dtype=object).astype(str)
        setups = setup_labels(rows).astype(str)
        return cls(
            tuple(sorted(set(gpus))),
            tuple(sorted({str(a) for a in architecture_groups(rows)})),
            tuple(sorted(set(setups))),
            tuple(sorted(set(_pairs(gpus, setups)))),
        )

    def unseen(self, rows: Mapping[str, Any]) -> dict[str, np.ndarray]:
        """Per unseen kind, which rows are new in that way (boolean masks).

        Judged once per distinct row (a batch repeats a few GPUs, LLMs and set-ups), by set
        look-ups: the labels and ``np.isin`` of every row cost more than the whole prediction.
        """
        columns = [c for c in _KEY_COLUMNS if c in rows]
        codes, first = row_codes([np.asarray(rows[c]) for c in columns])
        distinct = {c: np.asarray(rows[c])[first] for c in columns}
        gpus = np.asarray(distinct["gpu"], dtype=object).astype(str)
        setups = setup_labels(distinct).astype(str)
        known = self._known
        new_gpu = np.array([g not in known["gpus"] for g in gpus], dtype=bool)
        new_setup = np.array([s not in known["setups"] for s in setups], dtype=bool) | (
            ~new_gpu & np.array([p not in known["gpu_setups"] for p in _pairs(gpus, setups)])
        )
        new_llm = np.array(
            [a not in known["architectures"] for a in architecture_groups(distinct)], dtype=bool
        )
        if "llm_from_config" in distinct:  # a query's: True for an LLM read from its config
            new_llm |= np.equal(distinct["llm_from_config"], True).astype(bool)
        return {
            UNSEEN_GPU: new_gpu[codes],
            UNSEEN_LLM: new_llm[codes],
            UNSEEN_SETUP: new_setup[codes],
        }

    @cached_property
    def _known(self) -> dict[str, frozenset[str]]:
        return {f.name: frozenset(getattr(self, f.name)) for f in fields(self)}

    def to_dict(self) -> dict[str, list[str]]:
        """JSON-ready (for the model card)."""
        return {f.name: list(getattr(self, f.name)) for f in fields(self)}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Seen:
        """The inverse of ``to_dict``."""
        return cls(**{f.name: tuple(data[f.name]) for f in fields(cls)})


def _pairs(gpus: np.ndarray, setups: np.ndarray) -> np.ndarray:
    return np.char.add(np.char.add(gpus.astype(str), "|"), setups.astype(str))


def novelty_labels(unseen: Mapping[str, np.ndarray], n: int) -> np.ndarray:
    """Each row's kinds of novelty in words: ``measured``, or the unseen kinds joined by " + ".

    Worded once per combination of kinds (eight at most), each row's combination a bit mask:
    joining text row by row took a twentieth of a 10,000-row call (bench/serving.py).
    """
    unseen_kinds = KINDS[1:]
    combination = np.zeros(n, dtype=np.intp)
    for bit, kind in enumerate(unseen_kinds):
        if kind in unseen:
            combination |= np.asarray(unseen[kind], dtype=bool).astype(np.intp) << bit
    words = np.empty(1 << len(unseen_kinds), dtype=object)
    words[:] = [
        " + ".join(k for bit, k in enumerate(unseen_kinds) if code >> bit & 1) or MEASURED
        for code in range(len(words))
    ]
    return words[combination]
