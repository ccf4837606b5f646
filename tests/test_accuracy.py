"""The accuracy gate on real measurements: a reduced run of bench/accuracy.py, in process.

CI fails when the project's leave-one-GPU-out power MdAPE is not below the load-scaled TDP
baseline's on the same rows. It runs on the real measurements that ship with the package, so it
needs nothing beside the repository.
"""

from __future__ import annotations

import argparse
import importlib.util
import sys

import pytest
from conftest import REPO, TEST_RECIPE

from wattgpu.config import SHIPPED_DATA_DIR

pytestmark = pytest.mark.slow


def _bench():
    # the bench scripts import their shared helpers (bench/benchinfo.py) from their own folder
    if str(REPO / "bench") not in sys.path:
        sys.path.insert(0, str(REPO / "bench"))
    spec = importlib.util.spec_from_file_location("bench_accuracy", REPO / "bench" / "accuracy.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def measured_rows():
    args = argparse.Namespace(data=SHIPPED_DATA_DIR, measurements=None)
    return _bench().load_measured(args)[1]


def test_logo_power_beats_load_scaled_tdp_on_the_same_rows(measured_rows):
    bench = _bench()
    # One trial per nested study: the recipe's defaults, still chosen without the held-out GPU.
    table, chosen, by_gpu = bench.run(
        measured_rows,
        targets=("power",),
        splits=("LOGO",),
        methods=("catboost", "load-scaled-tdp"),
        trials=1,
        recipe=TEST_RECIPE,
    )
    # one study per GPU with power rows (LLM-Pilot's A10, T4 and A100 PCIe rows have ITL only)
    with_power = measured_rows["mean_power_w"] > 0
    assert len(chosen) == measured_rows.loc[with_power, "gpu"].nunique()
    mdape = table.set_index(["method", "scenario"])["mdape"]
    rows = table.set_index(["method", "scenario"])["n_rows"]
    for scenario in ("offline", "server"):
        assert rows["catboost", scenario] == rows["load-scaled-tdp", scenario]
    # every GPU's rows predicted by a model that never saw that GPU, in each scenario
    for scenario in ("offline", "server"):
        assert mdape["catboost", scenario] < mdape["load-scaled-tdp", scenario], table.to_string()
    # the model's rows carry their interval figures, the baseline's none
    model = table[table["method"] == "catboost"]
    assert model["interval_coverage"].between(0.0, 1.0).all()
    assert (model["interval_width"] > 0).all()
    assert table.loc[table["method"] != "catboost", "interval_coverage"].isna().all()
    # and per held-out GPU and scenario: every (GPU, scenario) with power rows, once
    measured = measured_rows[with_power].groupby(["gpu", "scenario"]).size()
    assert sorted(zip(by_gpu["gpu"], by_gpu["scenario"], strict=True)) == sorted(measured.index)
    assert by_gpu["n_rows"].tolist() == [
        measured[g, s] for g, s in zip(by_gpu["gpu"], by_gpu["scenario"], strict=True)
    ]
    assert by_gpu["interval_coverage"].between(0.0, 1.0).all()


def test_json_records_have_the_documented_fields(measured_rows):
    bench = _bench()
    table, _, _ = bench.run(
        measured_rows,
        targets=("itl",),
        splits=("LOGO",),
        methods=("roofline",),
    )
    records = bench.to_json_records(table)
    assert records and set(records[0]) == {
        "method",
        "target",
        "scenario",
        "split",
        "mdape",
        "pearson_r",
        "gpu_tau",
        "llm_tau",
        "n_rows",
        "interval_coverage",
        "interval_width",
        "source",
    }
    assert {r["method"] for r in records} == {"roofline"}
    assert all(isinstance(r["n_rows"], int) for r in records)


def test_near_ties_count_groups_whose_gpus_measure_within_five_percent():
    import pandas as pd

    rows = pd.DataFrame(
        {
            "model": ["a", "a", "b", "b", "c", "d", "d", "d"],
            "scenario": "offline",
            "gpu": ["x", "y", "x", "y", "x", "x", "y", "z"],
            # a: 104 / 100 ties; b: 110 / 100 does not; c: one GPU, no ranking;
            # d: 100, 103, 106 spans 6 %, no tie
            "value": [100.0, 104.0, 100.0, 110.0, 5.0, 100.0, 103.0, 106.0],
        }
    )
    assert _bench().near_ties(rows, "value") == (3, 1)
    # a and b rank x against y; d ranks three GPUs; c ranks nothing
    assert _bench().commonest_gpu_set(rows) == (("x", "y"), 2)


def test_nearest_measured_answers_only_rows_measured_elsewhere(measured_rows):
    bench = _bench()
    table, _, _ = bench.run(
        measured_rows, targets=("itl",), splits=("LOGO", "LOLO"), methods=("nearest-measured",)
    )
    assert set(table["method"]) == {"nearest-measured"}
    itl_rows = measured_rows["itl_s"].notna().sum()
    assert (table["n_rows"] > 0).all() and (table["n_rows"] < itl_rows).all()
    assert table["mdape"].between(0.0, 100.0).all(), table.to_string()


def test_loso_records_in_the_json_name_the_split_and_the_held_out_family(tmp_path):
    bench = _bench()
    out = tmp_path / "accuracy.json"
    bench.main(
        [
            "--targets",
            "power",
            "--splits",
            "LOSO",
            "--methods",
            "catboost",
            "physics-prior",
            "nearest-measured",
            "load-scaled-tdp",
            "--trials",
            "1",
            "--recipe",
            TEST_RECIPE,
            "--json",
            str(out),
        ]
    )
    import json

    records = json.loads(out.read_text())
    assert {r["split"] for r in records} == {"LOSO"}
    # power is measured by ML.ENERGY's two set-ups and Argonne; LLM-Pilot measured none
    families = {"mlenergy-2023", "mlenergy-2024-25", "argonne"}
    for method in ("catboost", "physics-prior", "load-scaled-tdp"):
        mine = [r for r in records if r["method"] == method]
        assert {r["source"] for r in mine} == {None, *families}, method
        pooled = sum(r["n_rows"] for r in mine if r["source"] is None)
        assert pooled == sum(r["n_rows"] for r in mine if r["source"] is not None)
    assert any(r["method"] == "nearest-measured" for r in records)
