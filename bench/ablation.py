"""What each design choice of the models is worth on real measurements: one change at a time.

Every variant differs from the adopted design (``wattgpu.modeling.learning.models``) in one
respect and is scored, like ``bench/accuracy.py``, on every shipped measured row that carries the
target, with CatBoost's default hyperparameters, the analytical prior refitted on each fold's
training rows, and several seeds (mean ± standard deviation over seeds). Splits: leave one data
source out (LOSO: the figure a user with their own set-up should read), leave one GPU out (LOGO)
and leave LLMs out in 10 blocks of architectures (L10O, a cheaper stand-in for
leave-one-LLM-out).

    python bench/ablation.py [--seeds 3] [--targets power itl ttft] [--splits LOSO LOGO L10O]
                             [--variants NAME ...] [--measurements PATH ...]
"""

from __future__ import annotations

import argparse
import datetime as dt
import shlex
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

import numpy as np
import pandas as pd
from benchinfo import add_data_arguments, load_measured, machine

from wattgpu.modeling.learning import models, side_by_side
from wattgpu.modeling.learning.analogs import Evidence, with_analogs
from wattgpu.modeling.learning.recipe import CORRECTION_WEIGHT, recipe_of
from wattgpu.modeling.learning.splits import LLM_BLOCKS, can_split, split_indices
from wattgpu.modeling.metrics import gpu_ranking_tau, mdape
from wattgpu.modeling.physical.features import (
    ANALOG_FEATURES,
    CPU_FLOOR_FEATURES,
    PRIOR_FEATURES,
    RAW_GPU_SPECS,
)
from wattgpu.modeling.physical.prior import refit_prior
from wattgpu.modeling.physical.targets import (
    MEASURED_COLUMN,
    TARGETS,
    decode,
    encode,
    rows_with_target,
)


def _unchanged(frame: pd.DataFrame) -> pd.DataFrame:
    return frame


@dataclass(frozen=True)
class Variant:
    """One design: its members' left-out columns, target coding and a change to the rows."""

    name: str
    members: tuple[tuple[str, ...], ...]
    encode: Callable[[str, pd.DataFrame], pd.Series] = encode
    decode: Callable[[str, pd.DataFrame, np.ndarray], np.ndarray] = decode
    rows: Callable[[pd.DataFrame], pd.DataFrame] = _unchanged
    # a change made before the prior is refitted (the prior then follows it)
    physics: Callable[[pd.DataFrame], pd.DataFrame] = _unchanged
    # the distance at which a query's correction keeps 1/e of itself (None: the recipe's)
    novelty_scale: float | None = None
    # no trees at all: the refitted prior's own answer
    prior_only: bool = False
    # the share of the correction kept at no distance (None: the recipe's default)
    trust: float | None = None
    # how the measured analogs enter (``analogs``): blended into the answer after the trees, as
    # the trees' inputs (and blended), or not at all; None: as the recipe says
    analogs: str | None = None


def _log_itl(target: str, frame: pd.DataFrame) -> pd.Series:
    return np.log(frame[MEASURED_COLUMN[target]].astype(float))


def _exp(target: str, frame: pd.DataFrame, raw: np.ndarray) -> np.ndarray:
    return np.exp(raw)


def _power_over_tdp(target: str, frame: pd.DataFrame) -> pd.Series:
    return frame["mean_power_w"].astype(float) / frame["gpu_tdp_w"].astype(float)


def _times_tdp(target: str, frame: pd.DataFrame, raw: np.ndarray) -> np.ndarray:
    return raw * frame["gpu_tdp_w"].to_numpy(float)


def _no_engine_floor(frame: pd.DataFrame) -> pd.DataFrame:
    return frame.assign(
        prior_power_cpu_w=frame["prior_power_w"],
        log_prior_power_cpu_tdp=frame["log_prior_power_tdp"],
        log_prior_itl_cpu_s=frame["log_prior_itl_s"],
    )


def _server_as_one_sequence(frame: pd.DataFrame) -> pd.DataFrame:
    return frame.assign(concurrency=frame["concurrency"].where(frame["scenario"] == "offline", 1.0))


def _itl_with_engine_floor(frame: pd.DataFrame) -> pd.DataFrame:
    return frame.assign(
        prior_itl_s=np.exp(frame["log_prior_itl_cpu_s"]),
        log_prior_itl_s=frame["log_prior_itl_cpu_s"],
        log_prior_power_tdp=frame["log_prior_power_cpu_tdp"],
    )


def _dense_only_weights(frame: pd.DataFrame) -> pd.DataFrame:
    """The design before issue 18: a step reads the active weights at a flat bytes per weight."""
    flat = frame["bytes_per_param"].astype(float)
    active = frame["llm_active_params_b"].astype(float) * 1e9 * flat
    return frame.assign(dense_weight_bytes=active, expert_weight_bytes=0.0)


# Features that carry the GPU beyond the prior: the raw specs and the physics built from them.
GPU_FEATURES = (
    *RAW_GPU_SPECS,
    "gpu_fused_attention",
    "weight_bytes_per_gpu",
    "bandwidth_latency_s",
    "compute_latency_s",
    "free_memory_gb",
    "max_concurrent_seqs",
    "fits_in_memory",
)


def _without(members: tuple[tuple[str, ...], ...], *columns: str) -> tuple[tuple[str, ...], ...]:
    return tuple((*without, *columns) for without in members)


def variants(target: str) -> list[Variant]:
    """The adopted design first, then one change each."""
    adopted = recipe_of(target).members
    with_analog_inputs = tuple(
        tuple(c for c in without if c not in ANALOG_FEATURES) for without in adopted
    )
    out = [
        Variant("adopted", adopted),
        Variant("physics prior alone (no trees)", adopted, prior_only=True),
        Variant("no measured analogs", adopted, analogs="none"),
        Variant("measured analogs blended", adopted, analogs="blended"),
        Variant("analogs as the trees' inputs, not blended", with_analog_inputs, analogs="inputs"),
        Variant("analogs as the trees' inputs and blended", with_analog_inputs, analogs="blended"),
        Variant("correction never shrunk", adopted, novelty_scale=float("inf")),
        Variant("correction shrunk at 0.25 decade", adopted, novelty_scale=0.25),
        Variant("correction shrunk at 1 decade", adopted, novelty_scale=1.0),
        Variant("keeping 3/4 of the correction", adopted, trust=0.75),
        Variant("keeping half of the correction", adopted, trust=0.5),
        Variant("trees without the engine", _without(adopted, "engine")),
        Variant("trees without the LLM family", _without(adopted, "llm_family", "llm_arch")),
        Variant("a correction that sees no GPU spec", _without(adopted, *GPU_FEATURES)),
        Variant(
            "dense-only weights read (active, flat bytes)", adopted, physics=_dense_only_weights
        ),
    ]
    if target == "power":
        out += [
            Variant("with the raw GPU specs", (PRIOR_FEATURES,)),
            Variant("server concurrency 1", adopted, rows=_server_as_one_sequence),
            Variant("no engine floor in the prior", adopted, rows=_no_engine_floor),
            Variant("target power / TDP", adopted, encode=_power_over_tdp, decode=_times_tdp),
        ]
    elif target == "itl":
        out += [
            Variant("one member, with the raw GPU specs", (CPU_FLOOR_FEATURES,)),
            Variant(
                "one member, without the raw GPU specs", ((*RAW_GPU_SPECS, *CPU_FLOOR_FEATURES),)
            ),
            Variant("target log ITL (no physics prior ratio)", adopted, _log_itl, _exp),
            Variant("prior with the engine floor", adopted, rows=_itl_with_engine_floor),
        ]
    return out


def _folds(frame: pd.DataFrame, split: str, seed: int) -> list[tuple[np.ndarray, np.ndarray]]:
    return list(split_indices(frame, LLM_BLOCKS if split == "L10O" else split, seed=seed))


def _fit_predict(
    variant: Variant, target: str, train: pd.DataFrame, test: pd.DataFrame, seed: int
) -> np.ndarray:
    train, test = refit_prior(variant.physics(train), variant.physics(test))
    train, test = variant.rows(train), variant.rows(test)
    if variant.prior_only:
        return decode(target, test, np.zeros(len(test)))
    label = variant.encode(target, train)
    recipe = recipe_of(target)
    settings = {**recipe.catboost_params(), "thread_count": 1}
    default_trust = settings.pop(CORRECTION_WEIGHT)
    trust = default_trust if variant.trust is None else variant.trust
    scale = recipe.novelty_scale if variant.novelty_scale is None else variant.novelty_scale
    analogs = variant.analogs or ("blended" if recipe.analogs else "none")
    evidence = Evidence.of(target, train) if analogs != "none" else None
    train, test = with_analogs(train, evidence), with_analogs(test, evidence)
    model = models.fit_members(target, train, label, variant.members, settings, seed, scale)
    blend = evidence if analogs == "blended" else None
    model = replace(model, familiarity=replace(model.familiarity, trust=trust), evidence=blend)
    pools = models.Pools(target, test)  # the test rows' analogs found among the training rows
    return variant.decode(target, test, models.raw_predict(model, test, pools))


def score(
    variant: Variant, target: str, rows: pd.DataFrame, seeds: int, splits: Sequence[str]
) -> dict[str, list]:
    """Per (split, scenario): MdAPE and GPU tau of every seed."""
    results: dict[str, list] = {}
    for split in splits:
        if split != "L10O" and not can_split(rows, split):
            continue
        for seed in range(seeds if split != "LOSO" else 1):  # LOSO's folds do not depend on it
            folds = _folds(rows, split, seed)
            answers = side_by_side.run(
                _fit_predict,
                [(variant, target, rows.iloc[a], rows.iloc[b], seed) for a, b in folds],
            )
            pred = np.full(len(rows), np.nan)
            for (_, test), answer in zip(folds, answers, strict=True):
                pred[test] = answer
            scored = rows.assign(true=rows[MEASURED_COLUMN[target]].astype(float), pred=pred)
            is_moe = scored["llm_active_params_b"] < scored["llm_params_b"]
            moe = scored[is_moe]
            if len(moe):
                results.setdefault(f"{split} MoE MdAPE %", []).append(
                    mdape(moe["true"], moe["pred"])
                )
                for scenario, part in scored[~is_moe].groupby("scenario"):
                    results.setdefault(f"{split} {scenario} dense-LLM MdAPE %", []).append(
                        mdape(part["true"], part["pred"])
                    )
            for scenario, part in scored.groupby("scenario"):
                key = f"{split} {scenario}"
                results.setdefault(f"{key} MdAPE %", []).append(mdape(part["true"], part["pred"]))
                tau = gpu_ranking_tau(part)
                if np.isfinite(tau):
                    results.setdefault(f"{key} GPU τ", []).append(tau)
    return results


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--targets", nargs="+", choices=TARGETS, default=list(TARGETS))
    parser.add_argument(
        "--splits", nargs="+", choices=("LOSO", "LOGO", "L10O"), default=["LOSO", "LOGO", "L10O"]
    )
    parser.add_argument("--variants", nargs="+", help="only the variants of these names")
    add_data_arguments(parser)
    args = parser.parse_args(argv)
    command = shlex.join(["python", "bench/ablation.py", *(argv or sys.argv[1:])])
    print("# Ablation on real measurements\n")
    print(f"- date: {dt.datetime.now().astimezone().isoformat(timespec='seconds')}")
    print(f"- machine: {machine()}")
    print(f"- command: {command}")
    print(f"- seeds: {args.seeds}; CatBoost defaults; prior refitted per fold\n", flush=True)
    _, measured, _, _ = load_measured(args)
    started = time.perf_counter()
    for target in args.targets:
        rows = rows_with_target(target, measured)
        chosen = [v for v in variants(target) if not args.variants or v.name in args.variants]
        table = {v.name: score(v, target, rows, args.seeds, args.splits) for v in chosen}
        columns = list(next(iter(table.values())))
        print(f"\n## {target} ({len(rows)} rows)\n")
        print("| variant | " + " | ".join(columns) + " |")
        print("|---|" + "---|" * len(columns))
        for name, results in table.items():
            cells = [f"{np.mean(results[c]):.2f} ± {np.std(results[c]):.2f}" for c in columns]
            print(f"| {name} | " + " | ".join(cells) + " |", flush=True)
    print(f"\nwall time: {(time.perf_counter() - started) / 60:.1f} min")


if __name__ == "__main__":
    main()
