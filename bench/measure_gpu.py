"""Measure mean GPU power and per-request ITL of LLM decoding on the GPU of this machine.

    python bench/measure_gpu.py --output OUT.csv [--models ID,...] [--batches 1,8,32,64]

Runs Hugging Face transformers ``generate`` (engine ``hf``: eager PyTorch, KV cache, static
batch, greedy, every sequence decodes exactly ``--output-tokens`` tokens) on models built from
the catalogue's ``config.json`` figures with random weights — no download is needed, and decode
speed and power depend on the shapes, not on the values of the weights. Power is NVML's board
power sampled every 50 ms during the measured runs. Writes rows in the project's measurement
schema (scenario ``offline``), marked as measured by this script.

Per (model, batch): one warm-up, then ``--repeats`` measured runs of prefill + decode. TTFT is
timed on a 1-token generate; ITL = (run time - TTFT) / (output tokens - 1): the time between two
tokens of one request.
"""

from __future__ import annotations

import argparse
import csv
import datetime as dt
import threading
import time

try:
    import torch
    import transformers
except ImportError:  # not part of the project's set-up: a GPU machine brings its own
    raise SystemExit(
        "bench/measure_gpu.py needs PyTorch and transformers on the machine whose GPU it measures "
        "(pip install torch transformers); they are not among the project's dependencies"
    ) from None

from wattgpu.config import SHIPPED_DATA_DIR
from wattgpu.data.measurements import OPTIONAL_COLUMNS, REQUIRED_COLUMNS

try:
    import pynvml
except ImportError:  # a machine without NVIDIA's library: the script still runs, without power
    pynvml = None

DEFAULT_MODELS = (
    "Qwen/Qwen2.5-1.5B-Instruct,meta-llama/Llama-3.2-3B-Instruct,meta-llama/Llama-3.1-8B-Instruct"
)
DEVICE = "cuda" if torch.cuda.is_available() else "cpu"
CONFIG_CLASSES = {"llama": transformers.LlamaConfig, "qwen2": transformers.Qwen2Config}


def catalogue_row(model: str) -> dict[str, str]:
    with (SHIPPED_DATA_DIR / "llms.csv").open() as handle:
        for row in csv.DictReader(handle):
            if row["model"] == model:
                return row
    raise SystemExit(f"{model} is not in the LLM catalogue (llms.csv)")


def build(model: str) -> torch.nn.Module:
    row = catalogue_row(model)
    config = CONFIG_CLASSES[row["family"]](
        hidden_size=int(row["hidden_size"]),
        intermediate_size=int(float(row["intermediate_size"])),
        num_hidden_layers=int(row["num_layers"]),
        num_attention_heads=int(row["num_attention_heads"]),
        num_key_value_heads=int(row["num_kv_heads"]),
        head_dim=int(row["head_dim"]),
        vocab_size=int(row["vocab_size"]),
        max_position_embeddings=int(float(row["max_position_embeddings"])),
        tie_word_embeddings=row["tie_word_embeddings"] == "True",
    )
    with torch.device(DEVICE):
        net = transformers.AutoModelForCausalLM.from_config(config, dtype=torch.bfloat16)
    net.eval()
    params = sum(p.numel() for p in net.parameters()) / 1e9
    print(
        f"{model}: built with {params:.2f} B parameters (catalogue: {row['params_b']})", flush=True
    )
    return net


class PowerSampler:
    """Samples NVML board power (W) every ``period`` seconds while active."""

    def __init__(self, handle, period: float = 0.05) -> None:
        self.handle, self.period, self.samples, self.active = handle, period, [], False
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.stop_flag = False
        self.thread.start()

    def _run(self) -> None:
        while not self.stop_flag:
            if self.active:
                watts = (
                    pynvml.nvmlDeviceGetPowerUsage(self.handle) / 1000.0
                    if self.handle
                    else float("nan")
                )
                self.samples.append(watts)
            time.sleep(self.period)


def synchronize() -> None:
    if DEVICE == "cuda":
        torch.cuda.synchronize()


def generate(net, prompts: torch.Tensor, tokens: int) -> float:
    synchronize()
    started = time.perf_counter()
    with torch.no_grad():
        out = net.generate(
            prompts,
            attention_mask=torch.ones_like(prompts),
            max_new_tokens=tokens,
            min_new_tokens=tokens,
            do_sample=False,
            pad_token_id=0,
        )
    synchronize()
    assert out.shape[1] == prompts.shape[1] + tokens, out.shape
    return time.perf_counter() - started


# The measurement schema's columns, in the order of the shipped measurement files.
FIELDS = [*REQUIRED_COLUMNS, *OPTIONAL_COLUMNS]


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    parser.add_argument("--output", required=True)
    parser.add_argument("--models", default=DEFAULT_MODELS)
    parser.add_argument("--batches", default="1,8,32,64")
    parser.add_argument("--input-tokens", type=int, default=512)
    parser.add_argument("--output-tokens", type=int, default=256)
    parser.add_argument("--repeats", type=int, default=2)
    return parser.parse_args()


def open_gpu() -> tuple[object, str, float]:
    """NVML handle, name and enforced power limit (W) of GPU 0; (None, "cpu", NaN) without one."""
    if pynvml is None or DEVICE != "cuda":
        return None, "cpu", float("nan")
    pynvml.nvmlInit()
    handle = pynvml.nvmlDeviceGetHandleByIndex(0)
    name = pynvml.nvmlDeviceGetName(handle)
    name = name.decode() if isinstance(name, bytes) else name
    return handle, name, pynvml.nvmlDeviceGetEnforcedPowerLimit(handle) / 1000.0


def idle_power(sampler: PowerSampler) -> float:
    """Mean board power (W) over 2 s with nothing running."""
    sampler.active = True
    time.sleep(2.0)
    sampler.active = False
    idle, sampler.samples = sampler.samples, []
    return sum(idle) / max(1, len(idle))


def measure(
    net, model: str, batch: int, args: argparse.Namespace, sampler: PowerSampler, gpu: str
) -> dict[str, object]:
    """One (model, batch) measurement as a row of the measurement schema; prints a summary."""
    vocab = net.config.vocab_size
    prompts = torch.randint(10, vocab - 10, (batch, args.input_tokens), device=DEVICE)
    generate(net, prompts, 8)  # warm-up
    ttft = min(generate(net, prompts, 1) for _ in range(2))
    sampler.samples, sampler.active = [], True
    times = [generate(net, prompts, args.output_tokens) for _ in range(args.repeats)]
    sampler.active = False
    run = sum(times) / len(times)
    power = sum(sampler.samples) / len(sampler.samples)
    itl = (run - ttft) / (args.output_tokens - 1)
    throughput = batch * args.output_tokens / run
    print(
        f"{model} bs={batch}: {power:.0f} W, ITL {itl * 1e3:.2f} ms, "
        f"TTFT {ttft * 1e3:.0f} ms, {throughput:.0f} tok/s",
        flush=True,
    )
    return {
        "gpu": gpu,
        "model": model,
        "scenario": "offline",
        "request_rate_rps": "",
        "batch_size": batch,
        "input_tokens": args.input_tokens,
        "output_tokens": args.output_tokens,
        "engine": "hf",
        "dtype": "bfloat16",
        "num_gpus": 1,
        "mean_power_w": round(power, 2),
        "itl_s": round(itl, 6),
        "itl_kind": "(run - ttft) / (output_tokens - 1), static batch",
        "ttft_s": round(ttft, 5),
        "throughput_tok_s": round(throughput, 2),
        "energy_per_token_j": round(power / throughput, 5),
        "source": "measured: bench/measure_gpu.py, HF transformers generate, "
        f"random weights, torch {torch.__version__}, "
        f"{len(sampler.samples)} NVML samples",
        "measured_at": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
    }


def write_rows(path: str, rows: list[dict[str, object]]) -> None:
    with open(path, "w", newline="") as handle_out:
        writer = csv.DictWriter(handle_out, fieldnames=FIELDS)
        writer.writeheader()
        writer.writerows(rows)


def main() -> None:
    args = parse_args()
    handle, name, limit = open_gpu()
    print(
        f"GPU: {name}; power limit {limit:.0f} W; torch {torch.__version__}; "
        f"transformers {transformers.__version__}",
        flush=True,
    )
    sampler = PowerSampler(handle)
    print(f"idle power {idle_power(sampler):.1f} W", flush=True)
    rows = []
    torch.manual_seed(0)
    for model in args.models.split(","):
        net = build(model)
        for batch in (int(b) for b in args.batches.split(",")):
            rows.append(measure(net, model, batch, args, sampler, name))
            write_rows(args.output, rows)  # after each, so a crash keeps what was measured
        del net
        torch.cuda.empty_cache()
    sampler.stop_flag = True


if __name__ == "__main__":
    main()
