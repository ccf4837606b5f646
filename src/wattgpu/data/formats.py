"""Weight formats of LLM checkpoints: bytes per weight, scales included, and what stays 16-bit.

The one table of the formats the project knows. Measurement files and queries name a format in
``dtype``; the LLM catalogue names the format a checkpoint ships in (``weight_format``). A name
not in ``BYTES_PER_PARAM`` is refused, never read as 16-bit.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike

from wattgpu.arrays import unique_codes

# Bytes per quantized weight, the format's scales included.
BYTES_PER_PARAM = {
    "float32": 4.0,
    "fp32": 4.0,
    "float16": 2.0,
    "fp16": 2.0,
    "bfloat16": 2.0,
    "bf16": 2.0,
    # FP8 (e4m3) with one 32-bit scale per 128 x 128 block (DeepSeek/Qwen) or per channel
    # (Llama FP8): under 0.1 % overhead.
    "fp8": 1.0,
    "float8": 1.0,
    "int8": 1.0,
    # INT4 as AWQ / GPTQ store it: a 16-bit scale and a 4-bit zero point per group of 128
    # weights, 0.5 + (2 + 0.5) / 128 = 0.51953125 bytes per weight.
    "int4": 0.5 + 2.5 / 128,
    # MXFP4 (OCP microscaling, gpt-oss): 4-bit elements and one 8-bit E8M0 scale per 32,
    # 0.5 + 1 / 32 = 0.53125 bytes per weight.
    "mxfp4": 0.5 + 1.0 / 32,
    # NVFP4 (NVIDIA Blackwell): 4-bit E2M1 elements and one FP8 E4M3 scale per 16 weights (plus
    # one FP32 scale per tensor, negligible), 0.5 + 1 / 16 = 0.5625 bytes per weight.
    "nvfp4": 0.5 + 1.0 / 16,
    # FP8 E4M3 with one FP32 scale per 128 x 128 block (DeepSeek-V3's checkpoints,
    # AIConfigurator's "fp8_block"): 1 + 4 / 16384 bytes, read as fp8.
    "fp8_block": 1.0,
    # INT4 weight-only (TensorRT-LLM's int4_wo, compressed-tensors "pack-quantized"): symmetric
    # 4-bit integers with one 16-bit scale per group of 32 and no zero point (the group size of
    # Kimi-K2.5's quantization_config, the one checkpoint served so here),
    # 0.5 + 2 / 32 = 0.5625 bytes per weight. Kimi-K2.5 quantizes only the routed experts (its
    # ignore list keeps attention, the shared experts, the dense MLPs and the head 16-bit).
    "int4_wo": 0.5 + 2.0 / 32,
}
SIXTEEN_BIT_FORMATS = frozenset({"float16", "fp16", "bfloat16", "bf16"})
# Formats that quantize only the routed experts (the MXFP4 checkpoints of gpt-oss keep
# attention, the router, the embeddings and the output head in 16-bit; so does Kimi-K2.5's
# INT4); the others keep only the embeddings, the output head and the norms in 16-bit.
EXPERTS_ONLY_FORMATS = frozenset({"mxfp4", "int4_wo"})
KNOWN_FORMATS = tuple(BYTES_PER_PARAM)
# One name per format, for what a model was trained on.
CANONICAL_FORMAT = {
    "fp32": "float32",
    "fp16": "float16",
    "bf16": "bfloat16",
    "float8": "fp8",
    "fp8_block": "fp8",
}


def is_known_format(name: object) -> bool:
    """Whether ``name`` (any case) is a weight format of ``BYTES_PER_PARAM``."""
    return str(name).lower() in BYTES_PER_PARAM


def canonical_format(name: object) -> str:
    """One name per format (``bf16`` -> ``bfloat16``, ``float8`` -> ``fp8``, ...), lower case."""
    text = str(name).lower()
    return CANONICAL_FORMAT.get(text, text)


def bytes_per_param(dtypes: ArrayLike) -> np.ndarray:
    """Bytes per weight of each row's format name (``BYTES_PER_PARAM``); blank means 16-bit.

    Queries and imported rows are checked against the known formats before they get here.
    """
    codes, names = unique_codes(dtypes)  # once per distinct format
    mapped = np.empty(len(names), dtype=float)
    mapped[:] = [BYTES_PER_PARAM.get(str(d).lower(), 2.0) for d in names]
    return mapped[codes]
