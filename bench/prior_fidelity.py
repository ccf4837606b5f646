"""How close the closed-form prior (wattgpu.modeling.physical.regimes) comes to real measurements.

Reads the shipped real measurement tables, keeps single-GPU, 16-bit, dense rows and prints the
MdAPE of the model's power and per-request ITL against them, per data set and engine and overall,
for DEFAULT_CONSTANTS and, with --refit, for constants fitted here (printed ready to paste into
DEFAULT_CONSTANTS).

    python bench/prior_fidelity.py [--refit] [--measurements PATH ...]

ITL: every row's ``itl_s`` is a per-request quantity (mean TPOT, median client-side ITL, or the
batch latency / output length that includes the batch's prefill). All are used: the model's
offline ITL adds the prefill stall ``batch x prefill / output_tokens`` to the decode step, which is
what the latency / output-length upper bound measures. ``inv_throughput_s_per_tok`` (1 /
throughput) is a different quantity and is never used.

The fit uses the vLLM rows except ``v2_vllm_batch_2024``: on the same H100 and Llama-3.1-8B at a
maximum batch of 256 those runs report 4x the ITL and 40 % of the power of the 2025 runs
(``v3_vllm_batch_2025``), a CPU-bound engine that no spec-based model can tell apart. Its figures
are printed all the same, as are those of the other engines (hf, tgi, trtllm, deepspeed-mii,
llama.cpp), which the simulator does not claim to model.
"""

from __future__ import annotations

import argparse
import datetime as dt
import platform
import sys
import time
from dataclasses import asdict, fields

import pandas as pd
from benchinfo import add_data_arguments, load_measured, machine

from wattgpu.modeling.learning.baselines import load_scaled_tdp, roofline_itl
from wattgpu.modeling.metrics import mdape
from wattgpu.modeling.physical.physics import (
    DEFAULT_CONSTANTS,
    NO_ENGINE_EFFECTS,
    NO_TTFT_TERMS,
    PhysicalConstants,
)
from wattgpu.modeling.physical.prior import (
    EXCLUDED_FAMILIES,
    SIXTEEN_BIT,
    calibration_mask,
    fit_engine_effects,
    fit_engine_floors,
    fit_ttft_terms,
)
from wattgpu.modeling.physical.prior_columns import with_prior
from wattgpu.modeling.physical.synthetic import calibrate, fidelity


def load_rows(
    args: argparse.Namespace,
) -> tuple[pd.DataFrame, dict[str, int], pd.DataFrame]:
    """Real single-GPU 16-bit dense rows with features, how many rows each filter dropped, and
    every row with features (the engine floors are fitted on all of them).
    """
    _, rows, raw, _ = load_measured(args)
    unresolved = len(raw) - len(rows)
    flags = rows["flags"].fillna("").astype(str) if "flags" in rows else pd.Series("", rows.index)
    single = rows["num_gpus"].fillna(1.0) == 1.0
    dense = (rows["llm_active_params_b"] >= rows["llm_params_b"]) & ~flags.str.contains("moe")
    dtype = rows["dtype"].astype(str).str.lower()
    sixteen = dtype.isin(SIXTEEN_BIT) & ~flags.str.contains("fp8")
    counts = {
        "read": len(raw),
        "unresolved names": unresolved,
        "multi-GPU": int((~single).sum()),
        "MoE": int((single & ~dense).sum()),
        "not 16-bit": int((single & dense & ~sixteen).sum()),
    }
    kept = rows[single & dense & sixteen].reset_index(drop=True)
    counts["kept"] = len(kept)
    return kept, counts, rows


def print_report(title: str, constants: PhysicalConstants, report: pd.DataFrame) -> None:
    print(f"\n## {title}\n")
    print("| constant | value |\n|---|---|")
    for name, value in asdict(constants).items():
        print(f"| {name} | {value:.4g} |")
    for target, unit in (("power", "mean power per GPU"), ("itl", "per-request ITL")):
        part = report[report["target"] == target]
        print(f"\n{target} ({unit}):\n")
        print("| data set | engine | fitted | rows | MdAPE % | median log(pred/true) |")
        print("|---|---|---|---|---|---|")
        for line in part.itertuples():
            fitted = "" if line.data_set in ("all", "fitted") else "yes" if line.fitted else "no"
            print(
                f"| {line.data_set} | {line.engine} | {fitted} | {line.n_rows} | "
                f"{line.mdape_pct:.1f} | {line.median_log_ratio:+.3f} |"
            )


def designs(rows: pd.DataFrame) -> dict[str, pd.DataFrame]:
    """``rows`` under the expert-aware prior and two dense-only designs of the weights read.

    ``experts``: the shipped physics (a step reads the weights outside the routed experts and the
    distinct experts its tokens hit; bytes per format with embeddings and head in 16-bit).
    ``active only``: the design before issue 18, every step reads the active parameters at the
    format's flat bytes per weight. ``all weights``: every step reads every weight (a dense LLM
    of the total size).
    """
    active = rows["llm_active_params_b"] * 1e9 * rows["bytes_per_param"]
    every = rows["llm_params_b"] * 1e9 * rows["bytes_per_param"]
    return {
        "experts": with_prior(rows),
        "active only": with_prior(rows.assign(dense_weight_bytes=active, expert_weight_bytes=0.0)),
        "all weights": with_prior(rows.assign(dense_weight_bytes=every, expert_weight_bytes=0.0)),
    }


def print_moe_report(every_row: pd.DataFrame) -> None:
    """Prior MdAPE on the vLLM MoE and quantized rows, expert physics vs the dense-only designs."""
    rows = every_row[every_row["engine"].astype(str) == "vllm"]
    moe = rows["llm_active_params_b"] < rows["llm_params_b"]
    quantized = rows["bytes_per_param"] < 2.0
    kinds = {"MoE": moe, "MoE, 16-bit": moe & ~quantized, "quantized": quantized}
    kinds["dense, 16-bit"] = ~moe & ~quantized
    print("\n## Mixture-of-experts and quantized rows (vLLM, every GPU count)\n")
    print("| rows | n (power / ITL) | design | power MdAPE % | ITL MdAPE % |")
    print("|---|---|---|---|---|")
    for kind, mask in kinds.items():
        part = rows[mask]
        for design, priced in designs(part).items():
            power = part["mean_power_w"].notna()
            itl = part["itl_s"].notna()
            p = mdape(part.loc[power, "mean_power_w"], priced.loc[power, "prior_power_w"])
            i = mdape(part.loc[itl, "itl_s"], priced.loc[itl, "prior_itl_s"])
            print(
                f"| {kind} | {int(power.sum())} / {int(itl.sum())} | {design} | {p:.1f} | {i:.1f} |"
            )


def with_fitted_flag(report: pd.DataFrame, rows: pd.DataFrame, mask: pd.Series) -> pd.DataFrame:
    key = rows["source"].astype(str) + "/" + rows["family"].astype(str)
    used = set(zip(key[mask], rows.loc[mask, "engine"], strict=True))
    report = report.copy()
    report["fitted"] = [
        (d, e) in used for d, e in zip(report["data_set"], report["engine"], strict=True)
    ]
    return report


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--refit", action="store_true", help="also fit the constants and report them"
    )
    add_data_arguments(parser)
    args = parser.parse_args()

    print("# Prior fidelity (wattgpu.modeling.physical.regimes vs real measurements)\n")
    print(f"- date: {dt.datetime.now().astimezone().isoformat(timespec='seconds')}")
    print(f"- machine: {machine()}")
    print(f"- python {platform.python_version()}, pandas {pd.__version__}")
    print(f"- command: python bench/prior_fidelity.py {' '.join(sys.argv[1:])}".rstrip())

    rows, counts, every_row = load_rows(args)
    mask = calibration_mask(rows)
    print("- rows: " + ", ".join(f"{k} {v}" for k, v in counts.items()))
    excluded = ", ".join(EXCLUDED_FAMILIES)
    print(f"- fitted on: {int(mask.sum())} rows (engine vllm, families except {excluded})")

    fitted_rows = rows[mask]
    power_base = mdape(
        fitted_rows["mean_power_w"].dropna(),
        load_scaled_tdp(fitted_rows)[fitted_rows["mean_power_w"].notna().to_numpy()],
    )
    with_itl = fitted_rows[fitted_rows["itl_s"].notna()]
    itl_base = mdape(with_itl["itl_s"], roofline_itl(with_itl))
    print(
        f"- no-learning baselines on the fitted rows: power, load-scaled TDP {power_base:.1f} %; "
        f"ITL, roofline (2 x params / bandwidth) {itl_base:.1f} %"
    )

    report = with_fitted_flag(fidelity(rows, DEFAULT_CONSTANTS, mask), rows, mask)
    print_report("DEFAULT_CONSTANTS", DEFAULT_CONSTANTS, report)
    print_moe_report(every_row)

    if args.refit:
        start = time.perf_counter()
        constants, refit_report = calibrate(rows, mask)
        seconds = time.perf_counter() - start
        print_report(
            f"refitted here ({seconds:.1f} s)",
            constants,
            with_fitted_flag(refit_report, rows, mask),
        )
        print("\nPaste into src/wattgpu/modeling/physical/physics.py:\n")
        print("DEFAULT_CONSTANTS = PhysicalConstants(")
        for field in fields(PhysicalConstants):
            print(f"    {field.name}={getattr(constants, field.name):.4g},")
        print(")")
        floors = fit_engine_floors(
            with_prior(every_row, constants, floors={}, effects=NO_ENGINE_EFFECTS)
        )
        print(
            f"\nEngine floors, s per layer per step, fitted on all {len(every_row)} measured rows "
            "(those with an ITL count):\n"
        )
        print("DEFAULT_ENGINE_FLOORS: dict[str, float] = {")
        for engine, floor in floors.items():
            print(f'    "{engine}": {floor:.3e},')
        print("}")
        effects = fit_engine_effects(with_prior(every_row, constants, floors, NO_ENGINE_EFFECTS))
        print("\nEngine effects on the decode step, fitted on the rows of set-ups measured on")
        print("several engines or releases (modeling.physical.prior.fit_engine_effects):\n")
        print("DEFAULT_ENGINE_EFFECTS = EngineEffects(")
        factors = ", ".join(f'"{e}": {v:.4f}' for e, v in sorted(effects.factors.items()))
        print(f"    factors={{{factors}}},")
        print(f"    per_year={effects.per_year:.4f},")
        print(f"    reference_year={effects.reference_year:g},")
        print(")")
        ttft = fit_ttft_terms(with_prior(every_row, constants, floors, effects, NO_TTFT_TERMS))
        print("\nTTFT terms, fitted on the rows with a TTFT:\n")
        print(f"DEFAULT_TTFT_TERMS = TtftTerms({ttft.overhead_s:.4g}, {ttft.prefill_scale:.4g})")


if __name__ == "__main__":
    main()
