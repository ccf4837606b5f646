"""How well the per-GPU efficiency model predicts kernels on a GPU it never saw.

Leave one system out of AIConfigurator's kernel tables: the held-out GPU gets its efficiencies
from the spec model (``wattgpu.data.kernels.spec_efficiencies``) fitted on the other six
profiled systems, and the bench prints the MdAPE of the kernel times that predicts:

* decode-shaped 16-bit GEMMs (``m <= 16``, ``n, k >= 4096``, every engine; the raw rows):
  ``time = bytes moved / (bandwidth x memory_efficiency)``;
* NCCL all-reduces (16-bit, every message size and GPU count of the shipped table):
  ``time = allreduce_latency_s + bytes x 2 (N - 1) / N / (link bandwidth x link_efficiency)``.

Beside it: the same with the GPU's own measured efficiencies (what the model's form can reach
at best), and with one efficiency for every GPU (the prior before per-GPU efficiencies: 0.7785
of the sheet's bandwidth; an all-reduce had no cost at all).

    python bench/kernels.py [--raw DIR]
"""

from __future__ import annotations

import argparse
import datetime as dt
import platform
import sys
from pathlib import Path

import pandas as pd

from wattgpu.config import SHIPPED_DATA_DIR
from wattgpu.data.catalog import Catalog
from wattgpu.data.importers.aiconfigurator_kernels import (
    KERNEL_SYSTEMS,
    MIN_WEIGHT_DIM,
    read_kernel_tables,
)
from wattgpu.data.kernels import (
    DECODE_M,
    KERNELS_FILE,
    link_bandwidth_gb_s,
    measured_efficiencies,
    read_kernels,
    spec_efficiencies,
)
from wattgpu.data.measurements import read_measurements, resolve_names
from wattgpu.modeling.metrics import mdape
from wattgpu.modeling.physical.features import build_features
from wattgpu.modeling.physical.prior_columns import with_prior

RAW = (
    Path(__file__).resolve().parents[1].parent
    / "shared/reference/aiconfigurator/raw/ai-dynamo+aiconfigurator@095f58a"
)
ONE_EFFICIENCY = 0.7785  # the prior's single memory efficiency before per-GPU efficiencies


def decode_gemms(raw: Path) -> pd.DataFrame:
    """Every decode-shaped 16-bit GEMM of the raw tables: system, bytes moved, latency (s)."""
    tables = read_kernel_tables(raw)
    parts = []
    for (system, op, _engine, _version, stem), table in tables.items():
        if op != "gemm" or stem != "gemm_perf":
            continue
        part = table[
            (table["gemm_dtype"] == "bfloat16")
            & (table["m"] <= DECODE_M)
            & (table["n"] >= MIN_WEIGHT_DIM)
            & (table["k"] >= MIN_WEIGHT_DIM)
        ]
        m, n, k = (part[c].to_numpy(float) for c in ("m", "n", "k"))
        parts.append(
            pd.DataFrame(
                {
                    "gpu": KERNEL_SYSTEMS[system],
                    "bytes": 2.0 * (n * k + m * k + m * n),
                    "seconds": part["latency"].to_numpy(float) / 1e3,
                }
            )
        )
    return pd.concat(parts, ignore_index=True)


def efficiencies(kernels: pd.DataFrame, catalog: Catalog) -> dict[str, pd.DataFrame]:
    """Per held-out system: its own measured efficiencies and those the spec model gives it."""
    gpus = catalog.gpus
    own = measured_efficiencies(kernels, gpus)
    held_out = {}
    for gpu in own.index:
        others = gpus.loc[own.index.drop(gpu)].copy()
        for column in own.columns:
            others[column] = own.loc[others.index, column]
        held_out[gpu] = spec_efficiencies(others, gpus.loc[[gpu]]).iloc[0]
    return {"measured": own, "spec model (LOSO)": pd.DataFrame(held_out).T}


def gemm_errors(gemms: pd.DataFrame, catalog: Catalog, effs: dict[str, pd.DataFrame]) -> dict:
    """Decode-GEMM MdAPE per GPU and overall, for each way of getting the efficiency."""
    bandwidth = catalog.gpus["memory_bandwidth_gb_s"].reindex(gemms["gpu"]).to_numpy() * 1e9
    ways = {name: frame["memory_efficiency"] for name, frame in effs.items()}
    ways["one efficiency"] = pd.Series(ONE_EFFICIENCY, index=effs["measured"].index)
    out = {}
    for name, eff in ways.items():
        predicted = gemms["bytes"] / (bandwidth * eff.reindex(gemms["gpu"]).to_numpy())
        errors = {
            gpu: mdape(part, predicted[part.index]) for gpu, part in gemms.groupby("gpu")["seconds"]
        }
        errors["all"] = mdape(gemms["seconds"], predicted)
        out[name] = errors
    return out


def allreduce_errors(kernels: pd.DataFrame, catalog: Catalog, effs: dict) -> dict:
    """NCCL all-reduce MdAPE per GPU and overall, for each way of getting the link's terms."""
    nccl = kernels[(kernels["op"] == "all_reduce") & (kernels["engine"] == "nccl")].reset_index()
    link = link_bandwidth_gb_s(catalog.gpus).reindex(nccl["gpu"]).to_numpy() * 1e9
    ring = 2.0 * (nccl["num_gpus"] - 1.0) / nccl["num_gpus"]
    out = {}
    for name, frame in effs.items():
        latency = frame["allreduce_latency_s"].reindex(nccl["gpu"]).to_numpy()
        share = frame["link_efficiency"].reindex(nccl["gpu"]).to_numpy()
        predicted = latency + nccl["size_lo"] * ring / (link * share)
        errors = {
            gpu: mdape(part, predicted[part.index]) for gpu, part in nccl.groupby("gpu")["value"]
        }
        errors["all"] = mdape(nccl["value"], predicted)
        out[name] = errors
    return out


def power_check() -> str:
    """The power prior's MdAPE on ML.ENERGY's measured rows per GPU, with and without the
    kernels' memory-busy power (``gpu_memory_power_factor``), shipped constants."""
    catalog = Catalog.load(SHIPPED_DATA_DIR / "gpus.csv", SHIPPED_DATA_DIR / "llms.csv")
    raw = read_measurements([SHIPPED_DATA_DIR / "measurements" / "mlenergy.csv"])
    rows, _ = resolve_names(raw, catalog)
    rows = rows[rows["mean_power_w"].notna()]
    with_kernels = build_features(rows, catalog)
    without = with_prior(with_kernels.assign(gpu_memory_power_factor=1.0))
    lines = [
        "Power prior on ML.ENERGY's measured rows (shipped constants), MdAPE:",
        "",
        "| GPU | rows | with the kernels' power | without |",
        "|---|---|---|---|",
    ]
    for gpu, part in with_kernels.groupby("gpu"):
        true = part["mean_power_w"]
        a = mdape(true, part["prior_power_w"])
        b = mdape(true, without.loc[part.index, "prior_power_w"])
        lines.append(f"| {gpu} | {len(part)} | {a:.1f} % | {b:.1f} % |")
    return "\n".join(lines)


def table(title: str, errors: dict) -> str:
    names = list(errors)
    rows = [f"{title}", "", "| GPU | " + " | ".join(names) + " |", "|---" * (len(names) + 1) + "|"]
    for gpu in errors[names[0]]:
        cells = " | ".join(f"{errors[n][gpu]:.1f} %" for n in names)
        rows.append(f"| {gpu} | {cells} |")
    return "\n".join(rows)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--raw", type=Path, default=RAW, help="AIConfigurator's raw folder")
    args = parser.parse_args(argv)
    if not args.raw.is_dir():
        print(f"raw kernel tables not found: {args.raw} (pass --raw)", file=sys.stderr)
        return 1
    catalog = Catalog.load(SHIPPED_DATA_DIR / "gpus.csv", SHIPPED_DATA_DIR / "llms.csv")
    kernels = read_kernels(SHIPPED_DATA_DIR / KERNELS_FILE)
    effs = efficiencies(kernels, catalog)
    print(f"# bench/kernels.py — {dt.datetime.now(dt.UTC).isoformat(timespec='seconds')}")
    print(f"machine: {platform.platform()}; command: python bench/kernels.py")
    print()
    print("Efficiencies each GPU gets when its own tables are held out (spec model):")
    shown = effs["spec model (LOSO)"][
        ["memory_efficiency", "compute_efficiency", "allreduce_latency_s", "link_efficiency"]
    ].astype(float)
    shown["allreduce_latency_s"] *= 1e6
    print(
        shown.rename(columns={"allreduce_latency_s": "allreduce_latency_us"}).round(3).to_string()
    )
    print()
    gemms = decode_gemms(args.raw)
    gemm = gemm_errors(gemms, catalog, effs)
    print(table(f"Decode-shaped 16-bit GEMM time, MdAPE ({len(gemms)} kernels):", gemm))
    print()
    reduce = allreduce_errors(kernels, catalog, effs)
    print(table("NCCL 16-bit all-reduce time, MdAPE (every size, 2-8 GPUs):", reduce))
    print()
    print(power_check())
    aims = (
        ("decode GEMM, spec model LOSO", gemm["spec model (LOSO)"]["all"], 10.0),
        ("all-reduce, spec model LOSO", reduce["spec model (LOSO)"]["all"], 20.0),
    )
    print()
    for label, value, aim in aims:
        print(
            f"{label}: {value:.1f} % (aim <= {aim:.0f} %: {'met' if value <= aim else 'not met'})"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
