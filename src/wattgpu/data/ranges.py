"""The physical range of a number a user states, and the ranges of an LLM's numbers.

One table of an LLM's numbers serves both ways a user describes an LLM the catalogue lacks: its
``llm_*`` query columns (``wattgpu.modeling.answering.queries``) and the fields of its
``config.json`` (``wattgpu.data.config_fields``), so that a layer count refused as a column is
refused as a config field too.
"""

from __future__ import annotations

from dataclasses import dataclass


def plain(number: float) -> str:
    """A number as a person writes it: whole ones whole (``-4``, not ``-4.0``; ``10000000``)."""
    number = float(number)
    if number.is_integer() and abs(number) < 1e15:
        return str(int(number))
    return f"{number:g}"


@dataclass(frozen=True)
class Range:
    """The values a numeric field may take.

    Attributes:
        low: the smallest allowed value (excluded when ``low_open``).
        high: the largest allowed value.
        whole: whether the value must be a whole number.
        unit: the unit, for the message.
        low_open: ``low`` itself is not allowed (e.g. parameters > 0).

    """

    low: float
    high: float
    whole: bool = False
    unit: str = ""
    low_open: bool = False

    def describe(self) -> str:
        """The allowed values in words, e.g. 'a whole number from 1 to 65536'."""
        kind = "a whole number" if self.whole else "a number"
        unit = f" {self.unit}" if self.unit else ""
        low, high = plain(self.low), plain(self.high)
        if self.low_open:
            return f"{kind} greater than {low} and at most {high}{unit}"
        return f"{kind} from {low} to {high}{unit}"


# Physical bounds: generous (an LLM of the next years fits), but a number outside them is a typo
# or a unit mistake, never a real configuration.
LLM_RANGES = {
    "llm_params_b": Range(0, 100_000, unit="billion", low_open=True),
    "llm_active_params_b": Range(0, 100_000, unit="billion", low_open=True),
    "llm_num_layers": Range(1, 10_000, whole=True),
    "llm_num_kv_layers": Range(1, 10_000, whole=True),
    "llm_hidden_size": Range(1, 1_000_000, whole=True),
    "llm_num_attention_heads": Range(1, 10_000, whole=True),
    "llm_num_kv_heads": Range(1, 10_000, whole=True),
    "llm_head_dim": Range(1, 100_000, whole=True),
    "llm_intermediate_size": Range(1, 10_000_000, whole=True),
    "llm_vocab_size": Range(1, 100_000_000, whole=True),
    "llm_max_position_embeddings": Range(1, 1_000_000_000, whole=True),
    # a mixture-of-experts LLM that is not in the catalogue: its routed experts and k
    "llm_num_experts": Range(1, 100_000, whole=True),
    "llm_experts_per_token": Range(1, 100_000, whole=True),
}
