"""Registry, promotion gate and the real MLflow model server over HTTP — no mocks."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from pathlib import Path

import httpx
import mlflow
import pandas as pd
import pytest
from click.testing import CliRunner
from conftest import REPO, free_port, serving, start_server, stop_server
from mlflow.tracking import MlflowClient

from wattgpu.cli import cli
from wattgpu.config import SHIPPED_DATA_DIR
from wattgpu.errors import ConfigError, ModelNotFound
from wattgpu.lifecycle import registry, tracking
from wattgpu.lifecycle.client import ANSWER_COLUMNS

pytestmark = pytest.mark.slow

H100_8B = {
    "gpu": "NVIDIA H100 SXM5",
    "model": "meta-llama/Llama-3.1-8B-Instruct",
    "scenario": "offline",
    "batch_size": 32,
}


@pytest.fixture(autouse=True)
def store_is_the_tracking_store(store):
    # the store is built once per session; other modules point MLflow elsewhere in between
    tracking.configure(store["settings"].tracking_uri)


@pytest.fixture(scope="module")
def server(store):
    """Plain `mlflow models serve`: the pyfunc's own checks hold there too."""

    def command(port: int) -> list[str]:
        return [
            *(sys.executable, "-m", "mlflow", "models", "serve"),
            *("-m", "models:/wattgpu-power@production", "--env-manager", "local"),
            *("-p", str(port), "-h", "127.0.0.1"),
        ]

    with serving(store, command, "server.log") as url:
        yield url


@pytest.fixture(scope="module")
def itl_server(store):
    """The ITL model behind plain `mlflow models serve`: its answers carry their tails."""

    def command(port: int) -> list[str]:
        return [
            *(sys.executable, "-m", "mlflow", "models", "serve"),
            *("-m", "models:/wattgpu-itl@production", "--env-manager", "local"),
            *("-p", str(port), "-h", "127.0.0.1"),
        ]

    with serving(store, command, "itl_server.log") as url:
        yield url


def post(url: str, payload) -> httpx.Response:
    body = payload if isinstance(payload, str) else json.dumps(payload)
    return httpx.post(
        f"{url}/invocations", content=body, headers={"Content-Type": "application/json"}, timeout=60
    )


def test_server_answers_records_and_split(server):
    records = [
        H100_8B,
        {**H100_8B, "gpu": "NVIDIA L4"},
        {"gpu": "NVIDIA L4", "model": "meta-llama/Llama-3.1-70B-Instruct", "scenario": "offline"},
        {
            "gpu": "NVIDIA H100 PCIe",
            "model": "meta-llama/Llama-3.1-8B-Instruct",
            "scenario": "server",
            "request_rate_rps": 0.5,
        },
    ]
    response = post(server, {"dataframe_records": records})
    assert response.status_code == 200, response.text
    assert "NaN" not in response.text
    rows = pd.DataFrame(response.json()["predictions"])
    assert (rows["unit"] == "W").all()
    h100, l4, big, server_row = response.json()["predictions"]
    # 70.6 B x 2 bytes = 141 GB of weights on a 24 GB L4: no number, the reason instead
    assert big["prediction"] is None and big["lower"] is None and big["upper"] is None
    assert big["warnings"].startswith("does not fit: weights need 141 GB, the GPU(s) have 24 GB")
    fit = rows.drop(index=2)
    assert fit["prediction"].between(10, 1500).all()
    assert (fit["lower"] <= fit["prediction"]).all() and (fit["prediction"] <= fit["upper"]).all()
    assert h100["prediction"] > l4["prediction"] and h100["warnings"] == ""
    # the load comes back with each answer (defaults filled in), so rows are told apart
    assert (h100["batch_size"], h100["input_tokens"], h100["num_gpus"]) == (32, 512, 1)
    assert server_row["request_rate_rps"] == 0.5 and server_row["batch_size"] is None
    split = pd.DataFrame(records[:2]).to_dict(orient="split", index=False)
    again = post(server, {"dataframe_split": split})
    assert again.status_code == 200
    assert [r["prediction"] for r in again.json()["predictions"]] == pytest.approx(
        [h100["prediction"], l4["prediction"]]
    )


def test_rest_gives_itl_its_tails_and_power_none(itl_server, server):
    records = [
        H100_8B,
        {"gpu": "NVIDIA A10", "model": H100_8B["model"], "scenario": "server", "concurrency": 16},
        {"gpu": "NVIDIA L4", "model": "meta-llama/Llama-3.1-70B-Instruct", "scenario": "offline"},
    ]
    response = post(itl_server, {"dataframe_records": records})
    assert response.status_code == 200, response.text
    assert "NaN" not in response.text
    offline, closed, big = response.json()["predictions"]
    # the client each load implies, by its name in clients.csv
    assert (offline["client"], closed["client"]) == ("batch", "closed")
    for answer in (offline, closed):
        assert answer["prediction"] <= answer["p90"] <= answer["p99"]
        assert answer["tails"] == "simulated" and answer["unit"] == "ms"
    # a configuration that cannot run: no median, no tails (JSON null)
    assert big["prediction"] is None and big["p90"] is None and big["p99"] is None
    assert big["tails"] == ""
    power = post(server, {"dataframe_records": records[:1]}).json()["predictions"][0]
    assert "p90" not in power and "tails" not in power


def test_unseen_gpu_described_by_specs(server):
    spec = {
        "gpu": "Imaginary X100",
        "gpu_memory_bandwidth_gb_s": 2500.0,
        "gpu_fp16_tensor_tflops": 600.0,
        "gpu_tdp_w": 500.0,
        "gpu_memory_gb": 96.0,
    }
    response = post(server, {"dataframe_records": [{**H100_8B, **spec}]})
    assert response.status_code == 200, response.text
    answer = response.json()["predictions"][0]
    assert 20 < answer["prediction"] <= 600 and "described by its specs" in answer["warnings"]
    # and its interval says it is calibrated for a GPU nobody measured
    assert "unseen GPU" in answer["novelty"]


CODER_CONFIG = REPO / "tests" / "fixtures" / "llm_configs"
CODER_CONFIG /= "Qwen--Qwen2.5-Coder-14B-Instruct_config.json"


def test_an_llm_described_by_its_config_json_as_text_or_object(server):
    text = CODER_CONFIG.read_text()
    coder = {"gpu": "NVIDIA H100 SXM5", "model": "Qwen/Qwen2.5-Coder-14B-Instruct"}
    coder |= {"scenario": "server", "concurrency": 8}
    records = [{**coder, "model_config": text}, {**coder, "model_config": json.loads(text)}]
    response = post(server, {"dataframe_records": records})
    assert response.status_code == 200, response.text
    as_text, as_object = response.json()["predictions"]
    assert as_text == as_object and 20 < as_text["prediction"] <= 700
    assert as_text["model"] == "Qwen/Qwen2.5-Coder-14B-Instruct"
    assert "unseen LLM" in as_text["novelty"]
    assert "LLM read from its config.json, not from the catalogue" in as_text["warnings"]
    # the same request in columns (`wattgpu predict --url` sends them so)
    split = pd.DataFrame(records[:1]).to_dict(orient="split", index=False)
    again = post(server, {"dataframe_split": split})
    assert again.status_code == 200 and again.json()["predictions"][0] == as_text
    # a config the count cannot read: a 400 naming the row, model_config and the field
    broken = {**json.loads(text), "model_type": "gpt_neox"}
    refused = post(server, {"dataframe_records": [records[0], {**coder, "model_config": broken}]})
    assert refused.status_code == 400
    # (plain `mlflow models serve` puts the request's repr before it: `wattgpu serve` does not)
    assert (
        "row 1: model_config: model_type 'gpt_neox' is not an architecture wattgpu reads"
        in refused.json()["message"]
    )
    assert "Traceback" not in refused.text


@pytest.mark.parametrize(
    ("payload", "field_text"),
    [
        (
            {"dataframe_records": [{**H100_8B, "gpu": "NVIDIA H100 SMX5"}]},
            "closest: NVIDIA H100 SXM5",
        ),
        ({"dataframe_records": [{"gpu": "NVIDIA L4", "model": "gpt2"}]}, "scenario"),
        ({"dataframe_records": [{**H100_8B, "batch_size": "lots"}]}, "batch_size"),
        (
            {"dataframe_records": [{**H100_8B, "batch_size": -4}]},
            "batch_size must be a whole number from 1 to 65536; got -4",
        ),
        (
            {"dataframe_records": [{**H100_8B, "scenario": "batch"}]},
            "scenario must be one of offline, server",
        ),
        (
            {"dataframe_records": [{**H100_8B, "scenario": "server", "request_rate_rps": None}]},
            "request_rate_rps",
        ),
        ({"dataframe_records": []}, "empty"),
        (
            {"dataframe_records": [H100_8B, H100_8B, {**H100_8B, "scenario": "??"}]},
            "row 2: scenario",
        ),
        ('{"dataframe_records": [', None),
        ({"dataframe_records": [{**H100_8B, "input_tokens": 1e400}]}, None),
        # the client and engine knobs (issue 57)
        (
            {"dataframe_records": [{**H100_8B, "max_num_seqs": 0}]},
            "max_num_seqs must be a whole number from 1 to 65536; got 0",
        ),
        (
            {"dataframe_records": [{**H100_8B, "max_batched_tokens": 100.5}]},
            "max_batched_tokens must be a whole number from 16 to 1048576; got 100.5",
        ),
        (
            {"dataframe_records": [{**H100_8B, "chunked_prefill": "maybe"}]},
            "chunked_prefill must be on or off (or true/false, 1/0); got 'maybe'",
        ),
        ({"dataframe_records": [{**H100_8B, "client": "nobody"}]}, "client must be one of "),
        (
            {"dataframe_records": [{**H100_8B, "client": "poisson"}]},
            "client 'poisson' sends requests at a rate: give request_rate_rps for a server",
        ),
    ],
)
def test_bad_payloads_get_400_naming_the_field(server, payload, field_text):
    response = post(server, payload)
    assert response.status_code == 400, response.text
    body = response.json()
    assert "stack_trace" not in body and "Traceback" not in response.text
    if field_text:
        assert field_text in body["message"]


def test_pyfunc_loads_and_predicts_without_the_repository(store, tmp_path):
    uri = tracking.get_run(store["runs"]["itl"]).data.tags["wattgpu.model_uri"]
    local = mlflow.artifacts.download_artifacts(uri, dst_path=str(tmp_path))
    script = f"""
import sys
sys.path = [p for p in sys.path if not p.startswith("{REPO / "src"}") and p not in ("", "{REPO}")]
sys.meta_path = [f for f in sys.meta_path if "editable" not in repr(f).lower()]
import mlflow.pyfunc, pandas as pd
model = mlflow.pyfunc.load_model({local!r})
out = model.predict(pd.DataFrame([{{**{H100_8B!r}, "batch_size": 32.0}}]))
import wattgpu
print(wattgpu.__file__)
print(out.loc[0, "prediction"], out.loc[0, "unit"], out.loc[0, "p99"], out.loc[0, "tails"])
"""
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, cwd=tmp_path, timeout=300
    )
    assert done.returncode == 0, done.stderr[-2000:]
    module_path, answer = done.stdout.strip().splitlines()[-2:]
    assert module_path.startswith(str(tmp_path)), module_path
    # the tails too: the simulated serving loop's tables travel with the served code
    value, unit, p99, source = answer.split()
    assert unit == "ms" and 1.0 < float(value) < 500.0
    assert float(p99) >= float(value) and source == "simulated"


def test_promotion_gate_both_ways(store):
    client = MlflowClient(store["settings"].tracking_uri)
    production = float(client.get_model_version("wattgpu-power", "1").tags[registry.GATE_TAG])
    worse = registry.register("power", store["runs"]["power"])
    better = registry.register("power", store["runs"]["power"])
    client.set_model_version_tag(
        "wattgpu-power", str(worse), registry.GATE_TAG, str(production + 5)
    )
    client.set_model_version_tag(
        "wattgpu-power", str(better), registry.GATE_TAG, str(production - 1)
    )
    with pytest.raises(
        registry.PromotionRefused, match=f"worse than production v1's {production:.2f} %"
    ):
        registry.promote("power", worse, "production")
    assert str(client.get_model_version_by_alias("wattgpu-power", "production").version) == "1"
    assert (
        "refused"
        in client.get_model_version("wattgpu-power", str(worse)).tags[
            "wattgpu.promotion.production"
        ]
    )
    done = registry.promote("power", better, "production")
    assert done.previous_production == 1
    assert str(client.get_model_version_by_alias("wattgpu-power", "production").version) == str(
        better
    )
    assert client.get_model_version("wattgpu-power", "1").current_stage == "Archived"
    assert "replaced by" in client.get_model_version("wattgpu-power", "1").tags["wattgpu.archived"]
    forced = registry.promote("power", worse, "production", force=True)
    assert forced.forced and str(
        client.get_model_version_by_alias("wattgpu-power", "production").version
    ) == str(worse)
    staging = registry.promote("power", better, "staging")
    assert (
        str(client.get_model_version_by_alias("wattgpu-power", "staging").version) == str(better)
        and staging.stage == "staging"
    )


def test_bad_promotions_change_nothing(store):
    client = MlflowClient(store["settings"].tracking_uri)
    before = client.get_model_version_by_alias("wattgpu-itl", "production").version
    with pytest.raises(ModelNotFound, match="has no version 99"):
        registry.promote("itl", 99, "production")
    with pytest.raises(ConfigError, match="stage must be one of staging, production"):
        registry.promote("itl", 1, "prod")
    assert client.get_model_version_by_alias("wattgpu-itl", "production").version == before


def test_cli_models_predict_and_refusal(store, monkeypatch, tmp_path):
    monkeypatch.setenv("MLFLOW_TRACKING_URI", store["settings"].tracking_uri)
    monkeypatch.setenv("WATTGPU_DATA_DIR", str(SHIPPED_DATA_DIR))
    runner = CliRunner()
    listed = runner.invoke(cli, ["models"])
    assert (
        listed.exit_code == 0 and "wattgpu-itl" in listed.output and "production" in listed.output
    )
    answer = runner.invoke(
        cli,
        [
            "predict",
            "--gpu",
            "H100",
            "--model",
            "meta-llama/Llama-3.1-8B-Instruct",
            "--scenario",
            "offline",
            "--batch-size",
            "32",
            "--format",
            "json",
        ],
    )
    assert answer.exit_code == 0, answer.output
    record = json.loads(answer.output)[0]
    assert record["power_prediction_w"] > 0 and record["itl_prediction_ms"] > 0
    # ITL's tails beside its median, said to be the simulation's; power has none
    assert record["itl_prediction_ms"] <= record["itl_p90_ms"] <= record["itl_p99_ms"]
    assert record["itl_tails"] == "simulated" and "power_p90_w" not in record
    queries = tmp_path / "q.csv"
    pd.DataFrame([H100_8B, {**H100_8B, "gpu": "NVIDIA L4"}]).to_csv(queries, index=False)
    written = runner.invoke(
        cli, ["predict", "--input", str(queries), "--output", str(tmp_path / "out.csv")]
    )
    assert written.exit_code == 0, written.output
    assert len(pd.read_csv(tmp_path / "out.csv")) == 2
    bad = runner.invoke(
        cli, ["predict", "--gpu", "H100 SMX", "--model", "gpt2", "--scenario", "offline"]
    )
    assert (
        bad.exit_code == 1
        and "closest: NVIDIA H100 SXM5" in bad.output
        and "Traceback" not in bad.output
    )
    base = ["predict", "--gpu", "H100", "--model", "gpt2", "--scenario", "offline"]
    older = runner.invoke(cli, [*base, "--engine-year", "2024", "--format", "json"])
    assert older.exit_code == 0, older.output
    # a stated release year acts through a bounded trend only: an answer, and no warning for it
    assert "engine year" not in json.loads(older.output)[0]["warnings"]
    unknown = runner.invoke(cli, [*base, "--engine-version", "0.99"])
    assert unknown.exit_code == 1 and unknown.output.startswith(
        "Error: --engine-version must be a release of vllm with a known date (nightly, 0.19, "
    )
    assert "Traceback" not in unknown.output
    ancient = runner.invoke(cli, [*base, "--engine-year", "1999"])
    assert ancient.exit_code == 1 and ancient.output.strip() == (
        "Error: --engine-year must be a whole number from 2000 to 2100; got 1999"
    )
    table = runner.invoke(cli, ["evaluate", "--target", "itl", "--version", "1"])
    assert (
        table.exit_code == 0
        and store["runs"]["itl"] in table.output
        and "| itl | catboost |" in table.output
    )
    missing = runner.invoke(
        cli, ["promote", "--target", "itl", "--version", "42", "--to", "production"]
    )
    assert missing.exit_code == 1 and "wattgpu-itl has no version 42" in missing.output


def test_predict_an_llm_from_its_config_json_as_an_unseen_llm(store, monkeypatch):
    monkeypatch.setenv("MLFLOW_TRACKING_URI", store["settings"].tracking_uri)
    query = ["predict", "--gpu", "H100", "--model", "Qwen/Qwen2.5-Coder-14B-Instruct"]
    query += ["--model-config", str(CODER_CONFIG), "--concurrency", "8", "--format", "json"]
    answer = CliRunner().invoke(cli, query)
    assert answer.exit_code == 0, answer.output
    record = json.loads(answer.output)[0]
    assert record["model"] == "Qwen/Qwen2.5-Coder-14B-Instruct"
    assert "unseen LLM" in record["power_novelty"] and "unseen LLM" in record["itl_novelty"]
    assert "LLM read from its config.json, not from the catalogue" in record["warnings"]
    # the same architecture under its catalogue name: no word of a config
    listed = [*query[:4], "Qwen/Qwen2.5-14B-Instruct", *query[7:]]
    catalogue = json.loads(CliRunner().invoke(cli, listed).output)[0]
    assert catalogue["model"] == "Qwen/Qwen2.5-14B-Instruct"
    assert "config.json" not in catalogue["warnings"]


def test_predict_one_query_prints_a_card_that_fits_80_columns(store, monkeypatch):
    monkeypatch.setenv("MLFLOW_TRACKING_URI", store["settings"].tracking_uri)
    runner = CliRunner()
    query = ["predict", "--gpu", "L40S", "--model", "meta-llama/Llama-3.1-8B-Instruct"]
    query += ["--concurrency", "64"]
    card = runner.invoke(cli, query)
    assert card.exit_code == 0, card.output
    lines = card.output.splitlines()
    assert max(len(line) for line in lines) <= 80, card.output
    assert lines[0].startswith("NVIDIA L40S · meta-llama/Llama-3.1-8B-Instruct · server, 64 users")
    # the store holds power and ITL models: a line each, with the JSON's number and interval
    answer = json.loads(runner.invoke(cli, [*query, "--format", "json"]).output)[0]
    for target, unit in (("power", "W"), ("itl", "ms")):
        value, lower, upper = (answer[f"{target}_{c}_{unit.lower()}"] for c in ANSWER_COLUMNS)
        mine = [line.split() for line in lines if line.split(" ")[0] == target]
        line = [target, f"{value:.1f}", unit, "(90", "%:", f"{lower:.1f}", "–", f"{upper:.1f})"]
        if target == "itl":  # and its tails, said to be the simulation's
            line += ["p90", f"{answer['itl_p90_ms']:.1f}", "·"]
            line += ["p99", f"{answer['itl_p99_ms']:.1f}"]
        assert mine == [line]
    assert "p90, p99 of itl: the simulation's alone" in lines
    # every warning of each model once, on its own line(s), naming the model(s) that gave it
    said = {}
    for target in ("power", "itl"):
        own = runner.invoke(cli, [*query, "--target", target, "--format", "json"])
        for warning in json.loads(own.output)[0]["warnings"].split("; "):
            said.setdefault(warning, []).append(target)
    assert said and "" not in said, said
    listed = []
    for line in lines[lines.index("warnings:") + 1 :]:
        if line.startswith("    "):  # a long warning goes on, indented
            listed[-1] += " " + line.strip()
        else:
            listed.append(line.strip())
    assert sorted(listed) == sorted(f"{', '.join(t)}: {w}" for w, t in said.items())


def test_the_example_queries_answer_as_their_own_columns_and_a_value_per_target(store, monkeypatch):
    from wattgpu.config import EXAMPLE_QUERIES

    monkeypatch.setenv("MLFLOW_TRACKING_URI", store["settings"].tracking_uri)
    runner = CliRunner()
    table = runner.invoke(cli, ["predict", "--input", str(EXAMPLE_QUERIES)])
    assert table.exit_code == 0, table.output
    header, *rows, note = table.output.split("\nwarnings:")[0].splitlines()
    given = pd.read_csv(EXAMPLE_QUERIES)
    assert header.split() == ["row", *given.columns, "power", "(W,", "90", "%)"] + [
        "itl",
        "(ms,",
        "90",
        "%)",
        *("itl", "p90", "/", "p99", "(ms)"),
    ]
    assert note == "p90, p99 of itl: the simulation's alone"
    assert len(rows) == len(given) == 4
    # the first row as the file gives it: A10 resolved, 16 users and 512 tokens whole
    first = rows[0].split()
    assert first[:10] == ["0", "NVIDIA", "A10", "meta-llama/Llama-3.1-8B-Instruct", "server"] + [
        "-",
        "16",
        "-",
        "512",
        "256",
    ]
    # every number, with its interval, is the one the CSV format carries
    full = pd.read_csv(
        io.StringIO(
            runner.invoke(
                cli, ["predict", "--input", str(EXAMPLE_QUERIES), "--format", "csv"]
            ).output
        )
    )
    for row, line in zip(full.itertuples(), rows, strict=True):
        assert line.split()[-7:] == [
            f"{row.power_prediction_w:.1f}",
            f"({row.power_lower_w:.1f}–{row.power_upper_w:.1f})",
            f"{row.itl_prediction_ms:.1f}",
            f"({row.itl_lower_ms:.1f}–{row.itl_upper_ms:.1f})",
            f"{row.itl_p90_ms:.1f}",
            "/",
            f"{row.itl_p99_ms:.1f}",
        ], line
    assert len(full.columns) > len(given.columns) + 6  # the rest: --format csv/json only


def test_predict_a_configuration_that_cannot_run_shows_why(store, monkeypatch):
    monkeypatch.setenv("MLFLOW_TRACKING_URI", store["settings"].tracking_uri)
    query = ["predict", "--gpu", "L4", "--model", "meta-llama/Llama-3.1-70B-Instruct"]
    card = CliRunner().invoke(cli, [*query, "--scenario", "offline"])
    assert card.exit_code == 0, card.output
    lines = card.output.splitlines()
    assert [line for line in lines if line.startswith("power")] == [
        "power  does not fit: weights need 141 GB, the GPU(s) have 24 GB"
    ], card.output
    assert [line for line in lines if line.startswith("itl")] == ["itl    as above"]
    assert max(len(line) for line in lines) <= 80, card.output


def test_predict_from_a_running_server(server, store, monkeypatch):
    monkeypatch.setenv("MLFLOW_TRACKING_URI", store["settings"].tracking_uri)
    runner = CliRunner()
    good = runner.invoke(
        cli,
        [
            "predict",
            "--gpu",
            "L4",
            "--model",
            "Qwen/Qwen2.5-7B-Instruct",
            "--scenario",
            "server",
            "--rate",
            "1",
            "--target",
            "power",
            "--url",
            server,
            "--format",
            "csv",
        ],
    )
    assert good.exit_code == 0, good.output
    assert "prediction" in good.output.splitlines()[0]
    bad = runner.invoke(
        cli,
        [
            "predict",
            "--gpu",
            "L4",
            "--model",
            "Qwen/Qwen2.5-7B-Instruct",
            "--scenario",
            "server",
            "--target",
            "power",
            "--url",
            server,
        ],
    )
    assert bad.exit_code == 1 and bad.output.strip() == (
        "Error: --rate is required for a server and must be greater than 0 (requests/s), "
        "unless the row gives --concurrency (concurrent users of a closed loop) instead"
    )


def test_an_internal_error_is_a_500_without_trace_and_logged_with_it(store, tmp_path):
    # A model whose card holds a training range no release writes (text for numbers): it loads,
    # then trips over the range while building a query's warnings, a genuine internal error.
    mlflow.set_tracking_uri(store["settings"].tracking_uri)
    local = mlflow.artifacts.download_artifacts(
        "models:/wattgpu-power@production", dst_path=str(tmp_path / "model")
    )
    metadata = tmp_path / "model" / "artifacts" / "metadata.json"
    card = json.loads(metadata.read_text())
    card["domain"]["llm_params_b"] = ["one", "ten"]
    metadata.write_text(json.dumps(card))
    port = free_port()
    command = [sys.executable, "-m", "mlflow", "models", "serve", "-m", local]
    command += ["--env-manager", "local", "-p", str(port), "-h", "127.0.0.1"]
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    log = tmp_path / "server.log"
    process = start_server(command, env, log, f"http://127.0.0.1:{port}")
    try:
        answer = post(f"http://127.0.0.1:{port}", {"dataframe_records": [H100_8B]})
    finally:
        stop_server(process)
    assert answer.status_code == 500
    assert "internal error while predicting (TypeError)" in answer.json()["message"]
    for leak in ("Traceback", 'File "', "domain.py", "llm_params_b"):
        assert leak not in answer.text
    logged = log.read_text()
    assert "ERROR wattgpu.lifecycle.pyfunc: internal error while predicting power" in logged
    trace = logged[logged.index("internal error while predicting power") :]
    assert "Traceback (most recent call last)" in trace
    assert "wattgpu/modeling/answering/domain.py" in trace and "TypeError" in trace


def test_recommend_holds_a_percentile_with_the_itl_model_behind_rest(itl_server, store):
    from wattgpu import recommendation as rec

    table = rec.recommend(
        "meta-llama/Llama-3.1-8B-Instruct",
        requests_per_day=30000,
        itl_slo_ms=80,
        slo_percentile=99,
        itl_url=itl_server,
        gpus=["L4", "A10", "H100"],
        settings=store["settings"],
    )
    judged = table[table["meets_slo"].notna()]
    assert len(judged) == 3 and (judged["itl_p99_ms"] >= judged["itl_ms"]).all()
    assert (judged["meets_slo"] == (judged["itl_p99_ms"] <= 80)).all()
