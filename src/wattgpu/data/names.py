"""Name resolution for one catalogue table: exact names and aliases, families, close matches.

A name resolves, in this order: to the row whose name or alias it is (after ``normalise_name``);
to the one row of its family (every word of the name is a word of one of the row's names, so
"Llama-3.1-70B-Instruct" means "meta-llama/Llama-3.1-70B-Instruct"); or to nothing, with either
the rows of its family ("V100": the eight V100 variants) or the closest names.

A table may name tier words (``GPU_TIERS``): words that make a product a different one ("Ti",
"SUPER", "SFF", "Max-Q", "D", "Passive"). A family leaves out the names that hold a tier word the
name asked for lacks, so "RTX 3080" is the two RTX 3080 cards (10 GB and 12 GB), not the 3080 Ti.
"""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass
from functools import cached_property

import numpy as np
import pandas as pd

from wattgpu.errors import DataError, listing

# Names are long and differ in a word; five shown still fits on one line.
MAX_SHOWN = 5
# The least similarity (difflib's ratio) of a close match, and the share of the best one's
# that another needs to be shown beside it (a family, not the whole field).
CUTOFF = 0.5
NEAR_BEST = 0.85
# The words that name a tier of an NVIDIA product line: "RTX 4080 SUPER", "RTX 3080 Ti",
# "RTX 4000 SFF Ada", "RTX PRO 6000 Max-Q" (words "max" and "q"), "RTX 4090 D", and the
# passively cooled server cards "Quadro RTX 6000 Passive" (260 W, the active card 295 W).
GPU_TIERS = frozenset({"ti", "super", "sff", "max", "q", "d", "passive"})


def normalise_name(name: str) -> str:
    """Return the comparison key of a GPU or model name: lower case; letters, digits and dots."""
    return re.sub(r"[^a-z0-9.]", "", str(name).lower())


def name_words(name: str) -> tuple[str, ...]:
    """The words of a name, lower case: runs of letters, digits and inner dots ("3.1")."""
    words = (w.strip(".") for w in re.findall(r"[a-z0-9.]+", str(name).lower()))
    return tuple(w for w in words if w)


@dataclass(frozen=True)
class NameMatch:
    """What a name resolves to.

    Attributes:
        canonical: the catalogue name, or ``None`` when the name resolves to no single row.
        family: the rows the name could mean when it names several (a family of variants).
        closest: the closest catalogue names when it names none.
        kind: ``GPU`` or ``LLM``, for messages.
        source: the file whose names and aliases are allowed (``gpus.csv``, ``llms.csv``).

    """

    canonical: str | None
    family: tuple[str, ...] = ()
    closest: tuple[str, ...] = ()
    kind: str = ""
    source: str = ""

    @property
    def problem(self) -> str:
        """Why the name does not resolve, to follow it in a message ('' when it resolves)."""
        if self.canonical is not None:
            return ""
        if self.family:
            shown = listing(self.family, MAX_SHOWN)
            count = f"{len(self.family)} catalogue {self.kind}s"
            return f"could be any of {count}: {shown}; give one of them"
        closest = f"; closest: {', '.join(self.closest)}" if self.closest else ""
        return f"is not in the catalogue{closest}; give a name or alias from {self.source}"


@dataclass(frozen=True)
class NameIndex:
    """The names and aliases of one catalogue table, and how a name resolves through them.

    Attributes:
        kind: ``GPU`` or ``LLM``, for messages.
        source: the table's file name, for messages.
        exact: normalised name or alias -> canonical name.
        names: (name or alias, canonical name, its words), in catalogue order.
        tiers: words a family name must hold to mean a name that holds them (``GPU_TIERS``).

    """

    kind: str
    source: str
    exact: dict[str, str]
    names: tuple[tuple[str, str, tuple[str, ...]], ...]
    tiers: frozenset[str] = frozenset()

    @classmethod
    def from_frame(
        cls,
        frame: pd.DataFrame,
        key: str,
        kind: str,
        source: str,
        tiers: frozenset[str] = frozenset(),
    ) -> NameIndex:
        """Index ``frame[key]`` and the ``|``-separated ``aliases``; refuse an ambiguous alias."""
        exact: dict[str, str] = {}
        names: list[tuple[str, str, tuple[str, ...]]] = []
        for canonical, aliases in zip(frame[key], frame["aliases"].fillna(""), strict=True):
            canonical = str(canonical)
            given = [canonical, *[a.strip() for a in str(aliases).split("|") if a.strip()]]
            for name in given:
                norm = normalise_name(name)
                if exact.get(norm, canonical) != canonical:
                    raise DataError(
                        f"{source}: name {name!r} is ambiguous, it names both "
                        f"{exact[norm]!r} and {canonical!r}"
                    )
                exact[norm] = canonical
                names.append((name, canonical, name_words(name)))
        return cls(kind, source, exact, tuple(names), tiers)

    def find(self, name: str) -> str | None:
        """The canonical name whose name or alias ``name`` is, or ``None`` (no guessing)."""
        return self.exact.get(normalise_name(name))

    def match(self, name: str) -> NameMatch:
        """Resolve ``name``: exactly, else by its family, else say what it could mean."""
        found = self.find(name)
        if found is not None:
            return NameMatch(found, kind=self.kind, source=self.source)
        family = self.family(name)
        if len(family) == 1:
            return NameMatch(family[0], kind=self.kind, source=self.source)
        if family:
            return NameMatch(None, family=tuple(family), kind=self.kind, source=self.source)
        return NameMatch(
            None, closest=tuple(self.closest(name)), kind=self.kind, source=self.source
        )

    def family(self, name: str) -> list[str]:
        """Canonical names (catalogue order) with a name holding every word of ``name``.

        A name that holds a tier word (``tiers``) that ``name`` lacks is another product.
        """
        words = set(name_words(name))
        if not words:
            return []
        return list(
            dict.fromkeys(
                c
                for _, c, own in self.names
                if words <= set(own) and not (set(own) - words) & self.tiers
            )
        )

    def closest(self, name: str, n: int = MAX_SHOWN) -> list[str]:
        """Up to ``n`` canonical names most like ``name``, the most alike first.

        A name is compared whole and by each run of as many words as ``name`` has, so that
        "V100X" is nearest the V100 variants, not the short aliases "A100" and "H100". A
        catalogue name scores its best part's difflib ratio; those above ``CUTOFF`` and within
        ``NEAR_BEST`` of the best are shown, ties in catalogue order.

        Each ratio is computed only where it can change the answer: the parts are visited from
        the highest bound on their ratio (difflib's ``quick_ratio``, for all parts at once)
        down, until a bound falls under what a shown name needs. The answer is the one every
        ratio would give, at a few ratios instead of thousands.
        """
        query = normalise_name(name)
        parts = self._parts(max(len(name_words(name)), 1))
        bounds = parts.bounds(query)
        scores = np.zeros(len(parts.canonicals))
        top = 0.0
        for index in np.argsort(-bounds, kind="stable"):
            if bounds[index] < max(CUTOFF, top * NEAR_BEST):
                break  # this part and every one after it score under what is shown
            owner = parts.owners[index]
            if bounds[index] <= scores[owner]:
                continue  # cannot raise its name's score
            ratio = difflib.SequenceMatcher(None, query, parts.texts[index]).ratio()
            scores[owner] = max(scores[owner], ratio)
            top = max(top, ratio)
        floor = max(CUTOFF, top * NEAR_BEST)
        ranked = np.argsort(-scores, kind="stable")  # ties in catalogue order
        return [parts.canonicals[i] for i in ranked if scores[i] >= floor][:n]

    @cached_property
    def _parts_by_words(self) -> dict[int, _Parts]:
        return {}

    def _parts(self, k: int) -> _Parts:
        """The parts a name of ``k`` words is compared with, built once per index and ``k``."""
        if k not in self._parts_by_words:
            self._parts_by_words[k] = _Parts(self.names, k)
        return self._parts_by_words[k]


# Every character a normalised name or word can hold.
_ALPHABET = "abcdefghijklmnopqrstuvwxyz0123456789."


def _letter_counts(text: str) -> np.ndarray:
    return np.array([text.count(c) for c in _ALPHABET], dtype=np.int32)


class _Parts:
    """The parts of every catalogue name for queries of k words, and their letter counts.

    A part is a name or alias whole, or one of its runs of k words (``NameIndex.closest``).
    """

    def __init__(self, names: tuple[tuple[str, str, tuple[str, ...]], ...], k: int) -> None:
        self.canonicals = list(dict.fromkeys(canonical for _, canonical, _ in names))
        number = {canonical: i for i, canonical in enumerate(self.canonicals)}
        owners, self.texts = [], []
        for alias, canonical, words in names:
            own = {normalise_name(alias)}
            own |= {"".join(words[i : i + k]) for i in range(len(words) - k + 1)}
            for text in sorted(own):
                owners.append(number[canonical])
                self.texts.append(text)
        self.owners = np.array(owners, dtype=np.intp)
        self.counts = np.array([_letter_counts(t) for t in self.texts]).reshape(-1, len(_ALPHABET))
        self.lengths = np.array([len(t) for t in self.texts], dtype=float)

    def bounds(self, query: str) -> np.ndarray:
        """Per part, difflib's ``quick_ratio`` with ``query``, which no ``ratio`` exceeds."""
        shared = np.minimum(self.counts, _letter_counts(query)).sum(axis=1)
        total = self.lengths + len(query)
        # difflib's own arithmetic (2 M / T; 1 for two empty strings), so a ratio never
        # exceeds its bound by a rounding
        return np.divide(2.0 * shared, total, out=np.ones_like(total), where=total > 0)
