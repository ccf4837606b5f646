"""LLM catalogue rows built from a model's Hugging Face ``config.json``, parameters counted.

Pure functions of the parsed JSON: :func:`catalogue_row` reads the structural fields the LLM
catalogue (``data/llms.csv``) holds and counts the parameters with :func:`count_params`, so that
no figure of a catalogue row built here is typed from memory. Multimodal configs keep the
language model under ``text_config``; its fields are read (the vision tower is not counted).

The parameter count follows the modules of the decoder as the transformers implementations of
these families build them: embeddings (and an untied output head), per layer the attention
(grouped-query, or multi-head latent attention with its LoRA-style down/up projections and
norms, plus DeepSeek-V3.2 / GLM-5's sparse-attention indexer; or a Gated DeltaNet linear
attention), the MLP (gated: gate, up and down projections) or the mixture of experts (routed
experts, shared experts, router and its bias), and the RMS norms. Multi-token-prediction layers
(``num_nextn_predict_layers``, ``mtp_*``) are not counted: model cards count the main model
(DeepSeek-V3: 671B without, 685B with its MTP module).

A config a user hands over (``read_config``) is checked before it is counted: its family must be
one whose modules the count follows (``READABLE_FAMILIES``), and every number the count reads
must lie in its range (:mod:`wattgpu.data.config_fields`); anything else is refused naming the
field. The count's cost does not depend on the values a config holds: layers are counted by kind
(:func:`layer_plan`), never one by one, so 10,000 layers cost what 32 do.
"""

from __future__ import annotations

import json
import math
from collections import Counter
from collections.abc import Mapping
from typing import Any

import pandas as pd

from wattgpu.data.config_fields import (
    EXPERT_KEYS,
    FULL_ATTENTION,
    LAYER_KEYS,
    LINEAR_ATTENTION,
    NESTED_KEYS,
    SLIDING_ATTENTION,
    check_config,
    first_stated,
    nested_config,
    shown,
)
from wattgpu.data.ranges import LLM_RANGES
from wattgpu.errors import DataError, listing

Config = Mapping[str, Any]
# How many decoder layers of each (attention kind, holds a mixture of experts).
LayerPlan = dict[tuple[str, bool], int]

_SHARED_KEYS = ("n_shared_experts",)
# The families (the text config's ``model_type``) whose decoder ``count_params`` follows, each
# checked against a model card (tests/test_aiconfigurator.py, tests/test_llm_from_config.py):
# gated MLPs or mixtures of them, grouped-query or latent attention. Others (GPT-NeoX's or
# Falcon's plain MLP, Nemotron-H's Mamba layers, Llama 4's dense interleave) would be miscounted.
READABLE_FAMILIES = (
    "deepseek_v3",
    "deepseek_v32",
    "glm_moe_dsa",
    "gpt_oss",
    "kimi_k2",
    "llama",
    "minimax_m2",
    "mistral",
    "mixtral",
    "qwen2",
    "qwen3",
    "qwen3_5_moe_text",
    "qwen3_5_text",
    "qwen3_moe",
    "qwen3_vl_moe_text",
    "qwen3_vl_text",
)
# quantization_config methods that store 4- or 8-bit integer weights, AWQ / GPTQ style.
_INTEGER_METHODS = ("awq", "gptq")


def _first(config: Config, keys: tuple[str, ...], default: Any = None) -> Any:
    """The value of the first of ``keys`` the config states, else ``default``."""
    key = first_stated(config, keys)
    return default if key is None else config[key]


def text_config(config: Config) -> dict[str, Any]:
    """The language model's fields: the ``text_config`` or ``llm_config`` it nests, else itself.

    Fields of the outer config that the text config lacks (``tie_word_embeddings``, the dtype,
    the quantization config) are carried over.
    """
    key = first_stated(config, NESTED_KEYS)
    inner = config[key] if key else None
    if not isinstance(inner, Mapping):
        return dict(config)
    out = dict(inner)
    for key in ("tie_word_embeddings", "torch_dtype", "dtype", "quantization_config"):
        if key in config and out.get(key) is None:
            out[key] = config[key]
    return out


def _multiples(step: int, low: int, high: int) -> int:
    """How many whole numbers from ``low`` to ``high`` ``step`` divides."""
    return max(0, high // step - (low - 1) // step) if high >= low else 0


def layer_plan(config: Config) -> LayerPlan:
    """How many decoder layers of each attention kind and MLP kind (experts or dense) there are.

    Attention from ``layer_types`` where the config lists them; else from
    ``full_attention_interval`` (every N-th layer full, the others linear: Qwen3-Next /
    Qwen3.5); else all full. Experts in every ``moe_layer_freq``-th layer (or
    ``decoder_sparse_step``, ``interleave_moe_layer_step``) from ``first_k_dense_replace`` on,
    but for ``mlp_only_layers``. Counted as pattern x repeats, never layer by layer: the cost is
    that of the lists the config holds, whatever number of layers it states.
    """
    c = text_config(config)
    n = int(_first(c, LAYER_KEYS))
    types = c.get("layer_types")
    if types and len(types) != n:
        raise DataError(f"config layer_types lists {len(types)} layers, not {n}")
    interval = 0 if types else int(c.get("full_attention_interval") or 0)

    def full(layer: int) -> bool:
        if types:
            return types[layer] == FULL_ATTENTION
        return interval == 0 or (layer + 1) % interval == 0

    experts = _first(c, EXPERT_KEYS) not in (None, 0)
    first_dense = int(c.get("first_k_dense_replace") or 0) if experts else n
    step = int(c.get("moe_layer_freq") or c.get("decoder_sparse_step") or 1)
    step = int(c.get("interleave_moe_layer_step") or step)
    # MoE layers: i >= first_dense with (i + 1) % step == 0, but for the dense-only ones
    dense_only = {int(i) for i in c.get("mlp_only_layers") or [] if experts}
    dense_only = {i for i in dense_only if first_dense <= i < n and (i + 1) % step == 0}
    plan: Counter[tuple[str, bool]] = Counter()
    if types:  # the list itself: as long as the config is

        def moe_at(i: int) -> bool:
            return i >= first_dense and (i + 1) % step == 0 and i not in dense_only

        plan.update((str(kind), moe_at(i)) for i, kind in enumerate(types))
        return dict(plan)
    full_layers = n // interval if interval else n
    moe = _multiples(step, first_dense + 1, n) - len(dense_only)
    full_step = math.lcm(step, interval) if interval else step
    full_moe = _multiples(full_step, first_dense + 1, n) - sum(map(full, dense_only))
    other = LINEAR_ATTENTION if interval else FULL_ATTENTION
    plan[FULL_ATTENTION, True] += full_moe
    plan[FULL_ATTENTION, False] += full_layers - full_moe
    plan[other, True] += moe - full_moe
    plan[other, False] += n - full_layers - (moe - full_moe)
    return {key: count for key, count in plan.items() if count}


def layer_counts(config: Config) -> Counter[str]:
    """How many decoder layers of each attention kind (``layer_plan`` without the MLPs)."""
    counts: Counter[str] = Counter()
    for (kind, _), count in layer_plan(config).items():
        counts[kind] += count
    return counts


def head_dim(config: Config) -> int:
    """Per-head size of the values: ``v_head_dim`` (MLA), ``head_dim``, else hidden / heads."""
    c = text_config(config)
    if c.get("kv_lora_rank"):
        return int(c["v_head_dim"])
    if c.get("head_dim"):
        return int(c["head_dim"])
    return int(c["hidden_size"]) // int(c["num_attention_heads"])


def _attention_params(c: Config, kind: str) -> int:
    """One layer's attention (or linear-attention) parameters, its norms included."""
    h = int(c["hidden_size"])
    heads = int(c["num_attention_heads"])
    if kind == LINEAR_ATTENTION:  # Gated DeltaNet (Qwen3-Next / Qwen3.5)
        nk, dk = int(c["linear_num_key_heads"]), int(c["linear_key_head_dim"])
        nv, dv = int(c["linear_num_value_heads"]), int(c["linear_value_head_dim"])
        key_dim, value_dim = nk * dk, nv * dv
        conv = (2 * key_dim + value_dim) * int(c["linear_conv_kernel_dim"])
        # in_proj q,k,v,z + b,a; conv1d; dt_bias, A_log; gated norm; out_proj
        return h * (2 * key_dim + 2 * value_dim + 2 * nv) + conv + 2 * nv + dv + value_dim * h
    if c.get("kv_lora_rank"):  # multi-head latent attention (DeepSeek-V3, Kimi-K2, GLM-5)
        kv_rank, rope = int(c["kv_lora_rank"]), int(c["qk_rope_head_dim"])
        nope, v = int(c["qk_nope_head_dim"]), int(c["v_head_dim"])
        q_rank = c.get("q_lora_rank")
        q_out = heads * (nope + rope)
        q = h * int(q_rank) + int(q_rank) + int(q_rank) * q_out if q_rank else h * q_out
        kv = h * (kv_rank + rope) + kv_rank + kv_rank * heads * (nope + v)
        params = q + kv + heads * v * h
        if c.get("index_n_heads"):  # sparse-attention indexer (DeepSeek-V3.2 / GLM-5 DSA)
            ih, idim = int(c["index_n_heads"]), int(c["index_head_dim"])
            params += int(q_rank) * ih * idim + h * idim + 2 * idim + h * ih
        return params
    kv_heads = int(c.get("num_key_value_heads") or heads)
    d = head_dim(c)
    q_out = heads * d * (2 if c.get("attn_output_gate") else 1)
    params = h * q_out + 2 * h * kv_heads * d + heads * d * h
    if c.get("attention_bias"):
        params += heads * d + 2 * kv_heads * d + h
    elif c.get("model_type") == "qwen2":  # Qwen2 always biases q, k and v (not o)
        params += heads * d + 2 * kv_heads * d
    if c.get("model_type", "").startswith(("qwen3", "minimax")) or c.get("use_qk_norm"):
        # per-head RMS norms of q and k (MiniMax-M2: over all heads, "per_layer")
        per_layer = c.get("qk_norm_type") == "per_layer"
        params += (heads + kv_heads) * d if per_layer else 2 * d
    if c.get("model_type") == "gpt_oss":
        params += heads  # attention sinks
    return params


def _mlp_params(h: int, inter: int) -> int:
    """A gated MLP (SwiGLU): gate, up and down projections."""
    return 3 * h * inter


def _expert_sizes(c: Config) -> tuple[int, int, int, int]:
    """Routed experts, experts per token, one expert's parameters, per-layer shared + router."""
    h = int(c["hidden_size"])
    experts = int(_first(c, EXPERT_KEYS))
    k = int(c["num_experts_per_tok"])
    inter = int(c.get("moe_intermediate_size") or c["intermediate_size"])
    one = _mlp_params(h, inter)
    if c.get("model_type") == "gpt_oss":
        one += 2 * inter + h  # biases of gate_up and down
    shared = int(_first(c, _SHARED_KEYS, 0) or 0) * _mlp_params(h, inter)
    for key in ("shared_expert_intermediate_size", "shared_intermediate_size"):
        if c.get(key):
            shared += _mlp_params(h, int(c[key])) + h  # + the shared expert's sigmoid gate
    router = h * experts
    if c.get("model_type") == "gpt_oss" or c.get("topk_method") == "noaux_tc":
        router += experts  # router bias / e_score_correction_bias
    elif c.get("use_routing_bias"):
        router += experts
    return experts, k, one, shared + router


def count_params(config: Config) -> tuple[float, float]:
    """Total and active parameters (billions) of the decoder a config describes.

    Active: what one token reads, i.e. all but the routed experts it is not sent to (the
    embedding and the output head are counted in both, as model cards count them).

    Raises:
        DataError: the config lacks a field the count needs.

    """
    c = text_config(config)
    try:
        h, vocab = int(c["hidden_size"]), int(c["vocab_size"])
        tied = bool(c.get("tie_word_embeddings", False))
        total = vocab * h * (1 if tied else 2) + h  # embeddings, head, final norm
        inactive = 0
        for (kind, is_moe), layers in layer_plan(c).items():
            total += layers * (_attention_params(c, kind) + 2 * h)  # + input, post-attn norms
            if is_moe:
                experts, k, one, rest = _expert_sizes(c)
                total += layers * (experts * one + rest)
                inactive += layers * (experts - k) * one
            else:
                total += layers * _mlp_params(h, int(c["intermediate_size"]))
    except (KeyError, TypeError, ValueError) as exc:
        raise DataError(f"config lacks a field the parameter count needs: {exc}") from None
    return total / 1e9, (total - inactive) / 1e9


def weight_format(config: Config, quant_config: Config | None = None) -> str:
    """The checkpoint's weight format: the quantization config's, else the config's dtype.

    ``quant_config`` is a ModelOpt ``hf_quant_config.json`` shipped beside the config (NVIDIA's
    NVFP4 / FP8 checkpoints), read first.
    """
    if quant_config:
        algo = str(quant_config.get("quantization", {}).get("quant_algo", "")).lower()
        if algo in ("nvfp4", "fp8"):
            return algo
        raise DataError(f"hf_quant_config quant_algo {shown(algo)} is not a known format")
    c = text_config(config)
    q = c.get("quantization_config") or {}
    method = q.get("quant_method") or ""
    method = method.lower() if isinstance(method, str) else repr(method)
    if method in ("fp8", "mxfp4"):
        return method
    if method in _INTEGER_METHODS and q.get("bits") in (4, 8):
        return f"int{q['bits']}"
    if method == "compressed-tensors":
        groups = q.get("config_groups") or {}
        if not isinstance(groups, Mapping):
            raise DataError(
                f"compressed-tensors config_groups must be a JSON object; got {shown(groups)}"
            )
        weights = [g.get("weights") or {} if isinstance(g, Mapping) else g for g in groups.values()]
        if weights and all(_int4(w) for w in weights):
            # a mixture of experts quantizes its routed experts only (Kimi-K2.5); a dense LLM
            # every linear layer, as AWQ / GPTQ do
            return "int4_wo" if _first(c, EXPERT_KEYS) else "int4"
        raise DataError(f"compressed-tensors config groups not known: {shown(weights)}")
    if method:
        raise DataError(
            f"quantization_config quant_method {shown(method)} is not a weight format wattgpu "
            "knows (fp8, mxfp4, awq or gptq of 4 or 8 bits, compressed-tensors int4)"
        )
    return str(c.get("torch_dtype") or c.get("dtype") or "bfloat16")


def _int4(weights: Any) -> bool:
    """Whether a compressed-tensors group's weights are 4-bit integers."""
    return isinstance(weights, Mapping) and (weights.get("num_bits"), weights.get("type")) == (
        4,
        "int",
    )


def attention_kind(config: Config) -> str:
    """The ``attention`` column: the attention kind a config describes.

    ``mla``, ``linear_hybrid`` (linear + full layers), ``sliding`` (some windowed layers), else
    ``mha`` / ``gqa`` / ``mqa`` from the KV heads.
    """
    c = text_config(config)
    kinds = layer_counts(c)
    if c.get("kv_lora_rank"):
        return "mla"
    if LINEAR_ATTENTION in kinds:
        return "linear_hybrid"
    if SLIDING_ATTENTION in kinds:
        return "sliding"
    heads = int(c["num_attention_heads"])
    kv = int(c.get("num_key_value_heads") or heads)
    return "mha" if kv == heads else "mqa" if kv == 1 else "gqa"


def parse_config(value: Any, source: str) -> dict[str, Any]:
    """A config.json as a dict: its JSON text, or the object a REST request already parsed.

    Raises:
        DataError: naming ``source``: the text is no JSON, or the JSON is no object.

    """
    if isinstance(value, str | bytes):
        try:
            value = json.loads(value)
        except json.JSONDecodeError as exc:
            where = f"line {exc.lineno} column {exc.colno}"
            raise DataError(f"{source} is not valid JSON: {exc.msg} at {where}") from None
        except RecursionError:
            raise DataError(f"{source} is not a config.json: JSON nested too deeply") from None
        except ValueError as exc:  # an integer of over 4,300 digits, or text that is no UTF-8
            raise DataError(f"{source} is not valid JSON: {str(exc).split(':')[0]}") from None
    if not isinstance(value, Mapping):
        raise DataError(
            f"{source} must be a JSON object (a model's config.json); got {type(value).__name__}"
        )
    return dict(value)


def read_config(config: Config, source: str) -> dict[str, Any]:
    """The catalogue columns (``catalogue_row``) of the LLM a user's config describes.

    The config is checked before any of its numbers is used, so that a config the count cannot
    read is refused in one line naming ``source`` and the field: its family must be one of
    ``READABLE_FAMILIES``, every number the count reads must lie in its range
    (``config_fields.check_config``), and the parameters counted must lie in ``llm_params_b``'s.

    Raises:
        DataError: naming ``source``, the field at fault, what is allowed and the bad value.

    """
    nested_config(config, source)
    c = text_config(config)
    family = c.get("model_type")
    if not isinstance(family, str) or family not in READABLE_FAMILIES:
        raise DataError(
            f"{source}: model_type {shown(family)} is not an architecture wattgpu reads from a "
            f"config.json (it reads {listing(READABLE_FAMILIES, len(READABLE_FAMILIES))}); "
            "describe the LLM by its llm_* columns instead"
        )
    check_config(c, source)
    try:
        row = catalogue_row(c)
    except DataError as exc:
        raise DataError(f"{source}: {exc}") from None
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise DataError(f"{source}: a field the row needs is missing or bad: {exc}") from None
    params = LLM_RANGES["llm_params_b"]
    if row["params_b"] > params.high:
        raise DataError(
            f"{source}: the parameters it describes must be at most {params.high:,.0f} billion; "
            f"got {row['params_b']:.3g} billion"
        )
    return row


def _blank_zero(value: int) -> int | None:
    return value or None


def catalogue_row(config: Config, quant_config: Config | None = None) -> dict[str, Any]:
    """The LLM catalogue's columns (``data/llms.csv``) that a config states, params counted.

    Not filled here: ``model``, ``aliases`` and ``notes`` (the caller's). ``intermediate_size`` is
    the config's own field (the dense MLP; for most MoE configs an unused or per-expert size, as
    the config writes it); ``moe_intermediate_size`` one routed expert's.
    """
    c = text_config(config)
    total, active = count_params(c)
    kinds = layer_counts(c)
    experts = _first(c, EXPERT_KEYS)
    heads = int(c["num_attention_heads"])
    sliding = kinds[SLIDING_ATTENTION]
    linear = kinds[LINEAR_ATTENTION]
    layers = kinds.total()
    linear_hybrid = linear > 0
    return {
        "family": str(c.get("model_type")),
        "arch": "hybrid" if linear_hybrid else "decoder",
        "params_b": round(total, 2),
        "active_params_b": round(active, 2),
        "num_layers": layers,
        "num_kv_layers": layers - sliding - linear,
        "hidden_size": int(c["hidden_size"]),
        "num_attention_heads": heads,
        "num_kv_heads": int(c.get("num_key_value_heads") or heads),
        "head_dim": head_dim(c),
        # all-MoE configs without a dense width (Qwen3.5): one expert's
        "intermediate_size": int(c.get("intermediate_size") or c["moe_intermediate_size"]),
        "vocab_size": int(c["vocab_size"]),
        "max_position_embeddings": int(c["max_position_embeddings"]),
        "tie_word_embeddings": bool(c.get("tie_word_embeddings", False)),
        "num_experts": int(experts) if experts else None,
        "experts_per_token": int(c["num_experts_per_tok"]) if experts else None,
        # a config without a dtype (gpt-oss, MiniMax-M2: quantized checkpoints) is read as
        # bfloat16, the dtype of their unquantized modules
        "dtype": str(c.get("torch_dtype") or c.get("dtype") or "bfloat16"),
        "shared_experts": _shared_count(c) if experts else None,
        "attention": attention_kind(c),
        "weight_format": weight_format(c, quant_config),
        "moe_intermediate_size": _blank_zero(int(c.get("moe_intermediate_size") or 0))
        or (int(c["intermediate_size"]) if experts else None),
        "kv_lora_rank": _blank_zero(int(c.get("kv_lora_rank") or 0)),
        "qk_rope_head_dim": int(c["qk_rope_head_dim"]) if c.get("kv_lora_rank") else None,
        "sliding_window": int(c["sliding_window"]) if sliding else None,
        "num_sliding_layers": sliding or None,
        "num_linear_layers": linear or None,
    }


def _shared_count(c: Config) -> int:
    """Shared experts per MoE layer (a ``shared_expert_intermediate_size`` is one)."""
    if c.get("n_shared_experts") is not None:
        return int(c["n_shared_experts"])
    sizes = (c.get("shared_expert_intermediate_size"), c.get("shared_intermediate_size"))
    return int(any(s for s in sizes))


def merge_rows(catalogue: pd.DataFrame, rows: list[dict[str, Any]]) -> pd.DataFrame:
    """The catalogue with ``rows`` in place of the rows of the same ``model``, others appended.

    Columns the catalogue lacks are added (blank for its other rows) before ``notes``; the
    catalogue's own rows and their order are kept.
    """
    out = catalogue.copy()
    new = pd.DataFrame(rows)
    columns = [c for c in out.columns if c != "notes"]
    columns += [c for c in new.columns if c not in out.columns and c != "notes"]
    columns.append("notes")
    out = out.reindex(columns=columns)
    for row in rows:
        where = out.index[out["model"] == row["model"]]
        if len(where):
            for key, value in row.items():
                out.at[where[0], key] = value
        else:
            out = pd.concat([out, pd.DataFrame([row]).reindex(columns=columns)], ignore_index=True)
    for column in out.columns:  # whole numbers as integers (a blank makes pandas write 8.0)
        values = out[column]
        if column in _FLOAT_COLUMNS or not pd.api.types.is_numeric_dtype(values):
            continue
        if pd.api.types.is_bool_dtype(values):
            continue
        whole = values.dropna()
        if len(whole) and (whole == whole.round()).all():
            out[column] = values.astype("Int64")
    return out


# Written as the catalogue has always written them (8.0: how pandas writes a column with blanks).
_FLOAT_COLUMNS = ("params_b", "active_params_b", "num_experts", "experts_per_token")


def describe(config_file: str, row: Mapping[str, Any], extra: str = "") -> str:
    """The ``notes`` of a built row: where its figures come from, and what the config adds."""
    parts = [f"from {config_file} (AIConfigurator 095f58a); params counted from the config"]
    if row.get("attention") == "mla":
        parts.append(
            f"MLA: KV cache holds kv_lora_rank {row['kv_lora_rank']} + qk_rope_head_dim "
            f"{row['qk_rope_head_dim']} per token and layer"
        )
    if row.get("num_linear_layers"):
        parts.append(
            f"{row['num_linear_layers']} Gated DeltaNet linear-attention layers (fixed-size "
            f"state) and {row['num_kv_layers']} full-attention layers"
        )
    if row.get("num_sliding_layers"):
        window = row["sliding_window"]
        parts.append(f"{row['num_sliding_layers']} layers of sliding window {window}")
    if row.get("num_experts"):
        parts.append(
            "intermediate_size as the config writes it (one expert's where it has none); one "
            f"expert {row['moe_intermediate_size']}"
        )
    if row.get("weight_format") != row.get("dtype"):
        parts.append(f"checkpoint weights {row['weight_format']}")
    if extra:
        parts.append(extra)
    return "; ".join(parts)
