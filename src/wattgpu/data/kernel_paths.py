"""Which kernels an engine runs for a weight format on a GPU, as data.

A format runs on a GPU in one of three ways: on tensor cores of its own (``native``: FP8 from
SM89, FP4 from SM100, INT8 from SM75), as weights widened to 16 bits inside the GEMM
(``weight-only``: vLLM's Marlin kernels for INT4, FP8 and FP4 weights on Ampere and newer,
GPTQ's kernels for INT4 down to Volta, TensorRT-LLM's ``int4_wo``/``int8_wo``), or not at all.
The table follows vLLM's "Supported Hardware" quantization table (docs.vllm.ai, features/
quantization, v0.14–v0.15: AWQ from Turing, GPTQ from Volta, Marlin GPTQ/AWQ/FP8/FP4 from
Ampere, FP8 W8A8 from Ada, INT8 W8A8 from Turing) and NVIDIA's FP4 tensor cores from
Blackwell (SM100). ``docs/model.md`` shows it with its sources.

A weight-only path costs its decode GEMMs at its own measured share of the bandwidth, relative to
16-bit GEMMs on the same GPU (the A100's ``int8_wo`` / ``int4_wo`` tables; ``gpu_*_gemm_factor``).
A native path is costed as 16-bit GEMMs are: the tables' FP8 and FP4 decode-shaped GEMMs reach
0.5-0.85 of the 16-bit share, but costing the served rows so made the prior worse (AIConfigurator's
ITL rows, leave-one-source-out, 23.3 -> 25.9 %; ``docs/model.md``).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from wattgpu.data.formats import canonical_format


@dataclass(frozen=True)
class FormatPaths:
    """The least compute capability of each way a format runs (``inf``: no such way).

    Attributes:
        native: runs on the format's own tensor cores from here.
        weight_only: runs widened to 16 bits from here (below ``native``).
        weight_only_kernel: the kernel table's GEMM format the weight-only path is costed with
            (``None``: the 16-bit GEMM itself; a native path is costed as 16-bit GEMMs are).
        source: where the thresholds come from.

    """

    native: float
    weight_only: float
    weight_only_kernel: str | None
    source: str


INF = float("inf")
NO_KERNEL = "none"  # the path of a format no engine runs on the GPU
VLLM_TABLE = "vLLM docs, quantization 'Supported Hardware' (v0.14/v0.15)"
FORMAT_PATHS: dict[str, FormatPaths] = {
    "float32": FormatPaths(0.0, INF, None, "CUDA cores, every GPU"),
    # 16-bit runs everywhere (tensor cores from Volta; the sheet's FP16 figure says how fast);
    # BF16 tensor cores arrive with Ampere, and engines run a BF16 checkpoint in FP16 below it
    "float16": FormatPaths(0.0, INF, None, "every GPU"),
    "bfloat16": FormatPaths(0.0, INF, None, "every GPU"),
    "fp8": FormatPaths(8.9, 8.0, "int8_wo", f"{VLLM_TABLE}: FP8 W8A8 Ada+, Marlin FP8 Ampere+"),
    "int8": FormatPaths(7.5, INF, None, f"{VLLM_TABLE}: INT8 W8A8 Turing+"),
    "int4": FormatPaths(
        INF, 7.0, "int4_wo", f"{VLLM_TABLE}: GPTQ Volta+, AWQ/Marlin Turing/Ampere+"
    ),
    "int4_wo": FormatPaths(INF, 7.0, "int4_wo", f"{VLLM_TABLE}: GPTQ Volta+; TensorRT-LLM int4_wo"),
    "mxfp4": FormatPaths(
        10.0,
        8.0,
        "int4_wo",
        f"{VLLM_TABLE}: Marlin FP4 Ampere+; FP4 tensor cores SM100+",
    ),
    "nvfp4": FormatPaths(
        10.0,
        8.0,
        "int4_wo",
        f"{VLLM_TABLE}: Marlin FP4 Ampere+; FP4 tensor cores SM100+",
    ),
}


def kernel_path(dtype: object, capability: float) -> str | None:
    """``native``, ``weight-only`` or ``None`` (no engine has a kernel) for a format on a GPU.

    A blank capability (a GPU described without it) is given the benefit of the doubt: native.
    """
    paths = FORMAT_PATHS.get(canonical_format(dtype))
    if paths is None or not np.isfinite(capability):
        return "native"
    if capability >= paths.native:
        return "native"
    if capability >= paths.weight_only:
        return "weight-only"
    return None


def unsupported_reason(dtype: object) -> str:
    """Why a format has no kernel below its least capability, in words."""
    paths = FORMAT_PATHS[canonical_format(dtype)]
    least = min(paths.native, paths.weight_only)
    name = canonical_format(dtype)
    return f"engines run {name} weights from compute capability {least:.1f} ({paths.source})"
