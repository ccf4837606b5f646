"""How long reading an LLM's config.json takes, by the number of layers it states.

Llama-3.1-8B's config (tests/fixtures/aiconfigurator) read by ``llm_configs.read_config`` with
32, 1,000 and 10,000 layers: the fastest of 9 timings of 50 readings each, per reading, with the
date, the machine and the command. The count's cost must not grow with the layers (issue 69).

    python bench/config_read_speed.py
"""

from __future__ import annotations

import datetime as dt
import json
import math
import sys
import time

from benchinfo import REPO, machine

from wattgpu.data.llm_configs import read_config

CONFIG = (
    REPO / "tests/fixtures/aiconfigurator/model_configs/meta-llama--Meta-Llama-3.1-8B_config.json"
)
LAYERS = (32, 1_000, 10_000)


def main() -> None:
    base = json.loads(CONFIG.read_text())
    print("# Reading a config.json, by its layers (wattgpu.data.llm_configs.read_config)\n")
    print(f"- date: {dt.datetime.now().astimezone().isoformat(timespec='seconds')}")
    print(f"- machine: {machine()}")
    print(f"- command: python bench/config_read_speed.py {' '.join(sys.argv[1:])}".rstrip())
    best = dict.fromkeys(LAYERS, math.inf)
    for _ in range(9):
        for layers in LAYERS:  # in turn: a busy machine slows each alike
            config = base | {"num_hidden_layers": layers}
            start = time.perf_counter()
            for _ in range(50):
                read_config(config, "config.json")
            best[layers] = min(best[layers], (time.perf_counter() - start) / 50)
    print("\n| layers | one reading, ms | over 32 layers' |")
    print("|---|---|---|")
    for layers in LAYERS:
        print(f"| {layers:,} | {1000 * best[layers]:.3f} | {best[layers] / best[32]:.2f} |")


if __name__ == "__main__":
    main()
