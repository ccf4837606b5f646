"""WattGPU: predict the GPU power draw and inter-token latency of serving open LLMs."""

__version__ = "0.1.0"
