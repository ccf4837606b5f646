"""WattGPU: predict the GPU power draw and inter-token latency of serving open LLMs."""

from typing import Any

__version__ = "0.1.0"


def __getattr__(name: str) -> Any:
    """``wattgpu.recommend(...)``, imported on first use so that ``import wattgpu`` stays cheap.

    The code lives in ``wattgpu.recommendation``: a submodule named ``recommend`` would shadow
    the function as soon as anything imported it.
    """
    if name == "recommend":
        from wattgpu.recommendation import recommend

        return recommend
    raise AttributeError(f"module 'wattgpu' has no attribute {name!r}")
