"""The fields of a config.json that the LLM reader takes, each checked before any is used.

A config a client sends (the REST column ``model_config``, ``--model-config``) is hostile until
checked: a count it states drives the parameter count's arithmetic, and an unchecked one can
overflow a float (``intermediate_size: 1e308``), describe an LLM no GPU could hold, or, were the
count to loop over it, hold a server worker for hours (``num_hidden_layers: 10**12``). So every
number :mod:`wattgpu.data.llm_configs` reads is checked here first:

- with the range of its ``llm_*`` query column (:data:`wattgpu.data.ranges.LLM_RANGES`), or a
  physical range of its own where it has no column (:data:`CONFIG_RANGES`; docs/operations.md
  lists both);
- as a whole number: a boolean, a string, a non-finite float or an integer beyond float range is
  refused like any other value out of range;
- the lists (``layer_types``, ``mlp_only_layers``) and nested objects (``text_config``,
  ``quantization_config``) for their shape and length.

A refusal is one line naming the source, the field, the allowed range and the value, the value
cut to :data:`MAX_SHOWN` characters: a message never echoes a whole input.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from wattgpu.data.formats import KNOWN_FORMATS
from wattgpu.data.ranges import LLM_RANGES, Range
from wattgpu.errors import DataError, listing

Config = Mapping[str, Any]

# Where a family's config names a field differently (the first one stated is read).
LAYER_KEYS = ("num_hidden_layers", "n_layer", "num_layers")
EXPERT_KEYS = ("n_routed_experts", "num_local_experts", "num_experts")
# Where a multimodal config keeps its language model (Qwen3-VL, Kimi-K2.5: text_config; InternVL:
# llm_config); the first one stated is read.
NESTED_KEYS = ("text_config", "llm_config")
# Each decoder layer's attention, as ``layer_types`` names it.
FULL_ATTENTION = "full_attention"
SLIDING_ATTENTION = "sliding_attention"
LINEAR_ATTENTION = "linear_attention"
LAYER_KINDS = (FULL_ATTENTION, SLIDING_ATTENTION, LINEAR_ATTENTION)
# The whole-number fields a catalogue row of any readable family needs (besides the layers).
REQUIRED = ("hidden_size", "num_attention_heads", "vocab_size", "max_position_embeddings")
# What multi-head latent attention (``kv_lora_rank``), its sparse indexer (``index_n_heads``),
# Gated DeltaNet layers and sliding-window layers need besides.
MLA_REQUIRED = ("qk_rope_head_dim", "qk_nope_head_dim", "v_head_dim")
INDEXER_REQUIRED = ("index_head_dim", "q_lora_rank")
LINEAR_REQUIRED = (
    "linear_num_key_heads",
    "linear_key_head_dim",
    "linear_num_value_heads",
    "linear_value_head_dim",
    "linear_conv_kernel_dim",
)
SLIDING_REQUIRED = ("sliding_window",)
# Longest bad value quoted back in a message.
MAX_SHOWN = 40

_LAYERS = LLM_RANGES["llm_num_layers"]
_HEADS = LLM_RANGES["llm_num_attention_heads"]
_HEAD_DIM = LLM_RANGES["llm_head_dim"]
_WIDTH = LLM_RANGES["llm_intermediate_size"]
_CONTEXT = LLM_RANGES["llm_max_position_embeddings"]


def _or_none(rule: Range) -> Range:
    """``rule`` with 0 allowed: how a config writes 'none' (no shared expert, no query LoRA)."""
    return Range(0, rule.high, whole=True)


# Every number the reader takes, with its allowed range. Fields with an ``llm_*`` column share its
# range; 0 is allowed where a config writes 0 for 'none' (and the reader reads it so).
CONFIG_RANGES: dict[str, Range] = {
    **dict.fromkeys(LAYER_KEYS, _LAYERS),
    "hidden_size": LLM_RANGES["llm_hidden_size"],
    "num_attention_heads": _HEADS,
    "num_key_value_heads": LLM_RANGES["llm_num_kv_heads"],
    "head_dim": _HEAD_DIM,
    "intermediate_size": _WIDTH,
    "vocab_size": LLM_RANGES["llm_vocab_size"],
    "max_position_embeddings": _CONTEXT,
    # a mixture of experts: 0 experts is a dense LLM
    **dict.fromkeys(EXPERT_KEYS, _or_none(LLM_RANGES["llm_num_experts"])),
    "num_experts_per_tok": LLM_RANGES["llm_experts_per_token"],
    "moe_intermediate_size": _WIDTH,
    "shared_expert_intermediate_size": _or_none(_WIDTH),
    "shared_intermediate_size": _or_none(_WIDTH),
    "n_shared_experts": _or_none(LLM_RANGES["llm_num_experts"]),
    # which layers hold the experts: the first k dense, every n-th (0 read as 1)
    "first_k_dense_replace": _or_none(_LAYERS),
    "moe_layer_freq": _or_none(_LAYERS),
    "decoder_sparse_step": _or_none(_LAYERS),
    "interleave_moe_layer_step": _or_none(_LAYERS),
    # every n-th layer full attention, the others linear (0: all full)
    "full_attention_interval": _or_none(_LAYERS),
    # multi-head latent attention and its sparse indexer (0: none)
    "kv_lora_rank": _or_none(_HEAD_DIM),
    "q_lora_rank": _or_none(_HEAD_DIM),
    "qk_rope_head_dim": _or_none(_HEAD_DIM),
    "qk_nope_head_dim": _or_none(_HEAD_DIM),
    "v_head_dim": _HEAD_DIM,
    "index_n_heads": _or_none(_HEADS),
    "index_head_dim": _HEAD_DIM,
    # Gated DeltaNet linear attention
    "linear_num_key_heads": _HEADS,
    "linear_key_head_dim": _HEAD_DIM,
    "linear_num_value_heads": _HEADS,
    "linear_value_head_dim": _HEAD_DIM,
    "linear_conv_kernel_dim": Range(1, 1_000, whole=True),
    # a window of tokens (0 as Qwen2's configs write it when no layer slides)
    "sliding_window": _or_none(_CONTEXT),
}


def shown(value: Any) -> str:
    """``repr(value)`` cut to ``MAX_SHOWN`` characters; a huge integer by its number of digits.

    (``repr`` of an integer of over 4,300 digits raises, and would be echoed whole.)
    """
    if isinstance(value, int) and not isinstance(value, bool) and value.bit_length() > 256:
        return f"an integer of about {int(value.bit_length() * math.log10(2)) + 1} digits"
    text = repr(value)
    return text if len(text) <= MAX_SHOWN else f"{text[: MAX_SHOWN - 3]}..."


def within(value: Any, rule: Range) -> bool:
    """Whether ``value`` is a number ``rule`` allows, compared exactly (no float overflow)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return False
    if isinstance(value, float) and not math.isfinite(value):
        return False
    if rule.whole and isinstance(value, float) and not value.is_integer():
        return False
    low_ok = value > rule.low if rule.low_open else value >= rule.low
    return low_ok and value <= rule.high


def first_stated(config: Config, keys: tuple[str, ...]) -> str | None:
    """The first of ``keys`` the config states (not null), or None."""
    return next((key for key in keys if config.get(key) is not None), None)


def check_number(config: Config, field: str, source: str, required: bool = False) -> None:
    """Refuse ``field`` outside its range; a ``required`` one also when missing or 0.

    Raises:
        DataError: naming ``source``, the field, the allowed range and the value.

    """
    rule = CONFIG_RANGES[field]
    if required:
        rule = Range(max(rule.low, 1), rule.high, whole=True)
    value = config.get(field)
    if value is None:
        if required:
            raise DataError(f"{source}: {field} is missing ({rule.describe()})")
        return
    if not within(value, rule):
        raise DataError(f"{source}: {field} must be {rule.describe()}; got {shown(value)}")


def nested_config(config: Config, source: str) -> Config | None:
    """The language model's config a multimodal config nests, or None where it nests none.

    Raises:
        DataError: a nested config that is not a JSON object.

    """
    key = first_stated(config, NESTED_KEYS)
    if key is None:
        return None
    inner = config[key]
    if not isinstance(inner, Mapping):
        raise DataError(f"{source}: {key} must be a JSON object; got {shown(inner)}")
    return inner


def check_config(c: Config, source: str) -> None:
    """Refuse a text config (``llm_configs.text_config``) whose numbers the reader cannot take.

    Every number of ``CONFIG_RANGES`` the config states is checked, and those its architecture
    needs must be stated: the layers and ``REQUIRED`` always, the experts per token and a width
    for a mixture of experts, and what latent, linear or sliding-window attention needs.

    Raises:
        DataError: naming ``source`` and the field, with what is allowed and the value.

    """
    layers = first_stated(c, LAYER_KEYS) or LAYER_KEYS[0]
    for field in (*REQUIRED, layers):
        check_number(c, field, source, required=True)
    for field in CONFIG_RANGES:
        check_number(c, field, source)
    if not (c.get("intermediate_size") or c.get("moe_intermediate_size")):
        rule = CONFIG_RANGES["intermediate_size"].describe()
        raise DataError(f"{source}: intermediate_size is missing ({rule})")
    experts = first_stated(c, EXPERT_KEYS)
    if experts is not None and c[experts]:
        check_number(c, "num_experts_per_tok", source, required=True)
    if c.get("kv_lora_rank"):
        for field in MLA_REQUIRED:
            check_number(c, field, source, required=True)
        if c.get("index_n_heads"):
            for field in INDEXER_REQUIRED:
                check_number(c, field, source, required=True)
    kinds = _check_lists(c, int(c[layers]), source)
    if LINEAR_ATTENTION in kinds or c.get("full_attention_interval"):
        for field in LINEAR_REQUIRED:
            check_number(c, field, source, required=True)
    if SLIDING_ATTENTION in kinds:
        for field in SLIDING_REQUIRED:
            check_number(c, field, source, required=True)
    _check_text(c, source)


def _check_lists(c: Config, layers: int, source: str) -> set[str]:
    """Refuse ``layer_types`` and ``mlp_only_layers`` of the wrong shape; the kinds listed."""
    types = c.get("layer_types")
    kinds: set[str] = set()
    if types:  # an empty list, like null, says nothing
        if not isinstance(types, list):
            raise DataError(f"{source}: layer_types must be a list; got {shown(types)}")
        if len(types) != layers:
            raise DataError(f"{source}: layer_types lists {len(types)} layers, not {layers}")
        # a kind other than sliding or linear is read as full attention (GLM-5's
        # deepseek_sparse_attention: full attention with an indexer)
        bad = next((i for i, t in enumerate(types) if not isinstance(t, str) or len(t) > 64), None)
        if bad is not None:
            raise DataError(
                f"{source}: layer_types must list attention kinds ({', '.join(LAYER_KINDS)}, ...) "
                f"of at most 64 characters; got {shown(types[bad])}"
            )
        kinds = set(types)
    dense = c.get("mlp_only_layers")
    if dense:
        layer = Range(0, layers - 1, whole=True)
        if not isinstance(dense, list) or len(dense) > layers:
            raise DataError(
                f"{source}: mlp_only_layers must be a list of at most {layers} layer indices; "
                f"got {shown(dense)}"
            )
        bad = next((i for i, index in enumerate(dense) if not within(index, layer)), None)
        if bad is not None:
            raise DataError(
                f"{source}: mlp_only_layers must list layers, {layer.describe()}; "
                f"got {shown(dense[bad])}"
            )
    return kinds


def _check_text(c: Config, source: str) -> None:
    """Refuse a dtype the project does not know and a quantization config that is no object."""
    for field in ("torch_dtype", "dtype"):
        value = c.get(field)
        if value is not None and value not in KNOWN_FORMATS:
            raise DataError(
                f"{source}: {field} must be one of {listing(KNOWN_FORMATS)}; got {shown(value)}"
            )
    quantization = c.get("quantization_config")
    if quantization is not None and not isinstance(quantization, Mapping):
        raise DataError(
            f"{source}: quantization_config must be a JSON object; got {shown(quantization)}"
        )
