"""Any LLM from its config.json: read, counted, checked and treated as an LLM nobody measured.

The configs are real ones (tests/fixtures/llm_configs/README.md says where each comes from);
every count below is worked out by hand from the config's fields.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from wattgpu.data.llm_configs import count_params, parse_config, read_config
from wattgpu.errors import DataError, QueryError
from wattgpu.modeling.answering.domain import domain_warnings
from wattgpu.modeling.answering.queries import check_query_columns
from wattgpu.modeling.learning.unseen import UNSEEN_LLM, Seen
from wattgpu.modeling.physical.features import build_features

CONFIGS = Path(__file__).parent / "fixtures" / "llm_configs"
CODER = "Qwen/Qwen2.5-Coder-14B-Instruct"
STRUCTURAL = (
    "num_layers",
    "hidden_size",
    "num_attention_heads",
    "num_kv_heads",
    "head_dim",
    "vocab_size",
    "tie_word_embeddings",
)


def config(stem: str) -> dict:
    return json.loads((CONFIGS / f"{stem}_config.json").read_text())


def coder_text() -> str:
    return (CONFIGS / "Qwen--Qwen2.5-Coder-14B-Instruct_config.json").read_text()


# --- the parameter counts, by hand --------------------------------------------------------------


def test_dense_count_of_qwen2_5_coder_14b_by_hand(catalog):
    # hidden h 5120, 48 layers, 40 heads and 8 KV heads of 128, MLP 13824, vocabulary 152064,
    # embeddings untied:
    #   embeddings + head     2 x 152,064 x 5,120                          = 1,557,135,360
    #   attention per layer   q 5120x5120 + k, v 2 x 5120x1024 + o 5120x5120 = 62,914,560
    #     + Qwen2's q, k, v biases 5,120 + 1,024 + 1,024                   =      7,168
    #   MLP per layer         3 x 5,120 x 13,824                           = 212,336,640
    #   two RMS norms         2 x 5,120                                    =     10,240
    #   per layer 275,268,608; x 48                                        = 13,212,893,184
    #   + the final norm 5,120                     total = 14,770,033,664 (card: "14.7B")
    total, active = count_params(config("Qwen--Qwen2.5-Coder-14B-Instruct"))
    assert total == pytest.approx(14.770033664, abs=1e-12)
    assert active == total
    row = read_config(config("Qwen--Qwen2.5-Coder-14B-Instruct"), "config.json")
    assert (row["family"], row["attention"], row["weight_format"]) == ("qwen2", "gqa", "bfloat16")
    assert (row["num_experts"], row["sliding_window"]) == (None, None)  # use_sliding_window false
    # the catalogue has its architecture under Qwen2.5-14B-Instruct's name: the same figures
    listed = catalog.llms.loc["Qwen/Qwen2.5-14B-Instruct"]
    assert row["params_b"] == listed["params_b"] == 14.77
    for column in (*STRUCTURAL, "intermediate_size", "max_position_embeddings"):
        assert row[column] == listed[column], column


def test_moe_count_of_qwen3_30b_a3b_by_hand(catalog):
    # hidden h 2048, 48 layers, 32 heads and 4 KV heads of 128, 128 experts of 768 (8 a token),
    # vocabulary 151936, embeddings untied:
    #   embeddings + head     2 x 151,936 x 2,048                          =   622,329,856
    #   attention per layer   q 2048x4096 + k, v 2 x 2048x512 + o 4096x2048 = 18,874,368
    #     + Qwen3's q and k norms 2 x 128                                  =        256
    #   two RMS norms         2 x 2,048                                    =      4,096
    #   experts per layer     128 x 3 x 2,048 x 768 = 128 x 4,718,592      = 603,979,776
    #   router                2,048 x 128                                  =    262,144
    #   per layer 623,120,640; x 48 = 29,909,790,720; + final norm 2,048
    #                                              total = 30,532,122,624 (card: 30.5B)
    #   not read by a token: 48 x (128 - 8) x 4,718,592 = 27,179,089,920
    #                                             active =  3,353,032,704 (card: 3.3B)
    total, active = count_params(config("Qwen--Qwen3-30B-A3B"))
    assert total == pytest.approx(30.532122624, abs=1e-12)
    assert active == pytest.approx(3.353032704, abs=1e-12)
    row = read_config(config("Qwen--Qwen3-30B-A3B"), "config.json")
    assert (row["num_experts"], row["experts_per_token"], row["moe_intermediate_size"]) == (
        128,
        8,
        768,
    )
    # the catalogue's Instruct-2507 release: the same architecture, the card's figures, which
    # are the counts cut to one decimal
    listed = catalog.llms.loc["Qwen/Qwen3-30B-A3B-Instruct-2507"]
    assert (int(total * 10) / 10, int(active * 10) / 10) == (
        listed["params_b"],
        listed["active_params_b"],
    )
    for column in (*STRUCTURAL, "intermediate_size", "num_experts", "experts_per_token"):
        assert row[column] == listed[column], column


# Every config kept as a fixture: AIConfigurator's (tests/test_aiconfigurator.py) and these.
FIXTURE_CONFIGS = sorted(
    [*(CONFIGS.parent / "aiconfigurator" / "model_configs").glob("*_config.json")]
    + [*CONFIGS.glob("*_config.json")]
)
# Catalogue figures that count otherwise than the config does, with why and by how much (B).
# gpt-oss-120b: the catalogue's 5.13 B active is OpenAI's table, which leaves out the input
# embedding, 201,088 x 2,880 = 0.579 B (tests/test_aiconfigurator.py checks that figure).
ACTIVE_WITHOUT = {"openai/gpt-oss-120b": 201088 * 2880 / 1e9}


def test_every_catalogue_llm_with_a_fixture_config_is_counted_within_2_percent(catalog):
    checked = []
    for path in FIXTURE_CONFIGS:
        name = path.name.removesuffix("_config.json").replace("--", "/")
        model = catalog.match("llm", name).canonical
        if model is None:  # Qwen2.5-Coder-14B: its architecture's row, in the test above
            continue
        total, active = count_params(json.loads(path.read_text()))
        listed = catalog.llms.loc[model]
        active_listed = listed["active_params_b"]
        if pd.isna(active_listed):
            active_listed = listed["params_b"]
        assert total == pytest.approx(listed["params_b"], rel=0.02), model
        assert active - ACTIVE_WITHOUT.get(model, 0.0) == pytest.approx(active_listed, rel=0.02), (
            model
        )
        checked.append(model)
    # the eight of AIConfigurator and Qwen3-30B-A3B: none left out by a name that did not match
    assert len(checked) == len(FIXTURE_CONFIGS) - 1 == 9, checked


@pytest.mark.parametrize(
    ("quantization", "expected"),
    [
        ({"quant_method": "awq", "bits": 4, "group_size": 128, "zero_point": True}, "int4"),
        ({"quant_method": "gptq", "bits": 8, "group_size": 128}, "int8"),
        ({"quant_method": "fp8", "activation_scheme": "dynamic"}, "fp8"),
        (  # W4A16 as llm-compressor writes it: every linear layer of a dense LLM in INT4
            {
                "quant_method": "compressed-tensors",
                "config_groups": {"group_0": {"weights": {"num_bits": 4, "type": "int"}}},
            },
            "int4",
        ),
    ],
)
def test_quantization_config_gives_the_checkpoint_format(quantization, expected):
    quantized = config("Qwen--Qwen2.5-Coder-14B-Instruct") | {"quantization_config": quantization}
    assert read_config(quantized, "config.json")["weight_format"] == expected


# --- configs it cannot read: one line naming the field ------------------------------------------


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (
            {"model_type": "gpt_neox"},
            "x.json: model_type 'gpt_neox' is not an architecture wattgpu reads from a "
            "config.json (it reads deepseek_v3, ",
        ),
        (
            {"hidden_size": None},
            "x.json: hidden_size is missing (a whole number from 1 to 1000000)",
        ),
        (
            {"num_key_value_heads": "eight"},
            "x.json: num_key_value_heads must be a whole number from 1 to 10000; got 'eight'",
        ),
        (
            {"num_hidden_layers": 0},
            "x.json: num_hidden_layers must be a whole number from 1 to 10000; got 0",
        ),
        ({"intermediate_size": None}, "x.json: intermediate_size is missing"),
        (
            {"quantization_config": {"quant_method": "bitsandbytes", "load_in_4bit": True}},
            "x.json: quantization_config quant_method 'bitsandbytes' is not a weight format",
        ),
    ],
)
def test_a_config_it_cannot_read_is_refused_naming_the_field(change, message):
    broken = config("Qwen--Qwen2.5-Coder-14B-Instruct") | change
    with pytest.raises(DataError) as refused:
        read_config({k: v for k, v in broken.items() if v is not None}, "x.json")
    assert str(refused.value).startswith(message)
    assert "\n" not in str(refused.value)


def test_a_mixture_of_experts_without_its_experts_per_token_is_refused():
    moe = config("Qwen--Qwen3-30B-A3B")
    del moe["num_experts_per_tok"]
    with pytest.raises(DataError, match=r"^c: num_experts_per_tok is missing"):
        read_config(moe, "c")


def test_text_that_is_no_config_object_is_refused():
    with pytest.raises(DataError, match=r"^f is not valid JSON: Expecting value at line 1 "):
        parse_config("not json", "f")
    with pytest.raises(DataError, match=r"^f must be a JSON object \(a model's config.json\); "):
        parse_config("[1, 2]", "f")


# --- a query describing its LLM by model_config -------------------------------------------------

QUERY = {"gpu": "NVIDIA A10", "scenario": "server", "concurrency": 8}


def test_a_query_reads_its_llm_from_model_config_text_or_object(catalog):
    rows = pd.DataFrame(
        [
            {**QUERY, "model": CODER, "model_config": coder_text()},
            {**QUERY, "model": "Qwen/Qwen2.5-14B-Instruct"},
            {**QUERY, "model": "my-moe", "model_config": config("Qwen--Qwen3-30B-A3B")},
        ]
    )
    out = check_query_columns(rows, catalog)
    assert out["model"].tolist() == [CODER, "Qwen/Qwen2.5-14B-Instruct", "my-moe"]
    assert out["llm_from_config"].tolist() == [True, False, True]
    assert out["llm_in_catalog"].tolist() == [False, True, False]
    assert out["llm_params_b"][[0, 2]].tolist() == [14.77, 30.53]
    assert out["llm_active_params_b"][2] == 3.35
    assert out["llm_num_experts"][2] == 128 and np.isnan(out["llm_num_experts"][0])
    assert out["llm_attention"].tolist() == ["gqa", None, "gqa"]
    # the catalogue row fills the middle row, the configs the others: the same architecture
    features = build_features(out, catalog)
    assert features["weight_bytes"][0] == features["weight_bytes"][1]


def test_a_config_names_the_row_the_model_config_and_the_field(catalog):
    rows = pd.DataFrame(
        [
            {**QUERY, "model": CODER, "model_config": coder_text()},
            {**QUERY, "model": "x", "model_config": json.dumps({"model_type": "llama"})},
        ]
    )
    with pytest.raises(QueryError) as refused:
        check_query_columns(rows, catalog)
    assert str(refused.value) == (
        "row 1: model_config: hidden_size is missing (a whole number from 1 to 1000000)"
    )
    assert (refused.value.field, refused.value.row) == ("model_config", 1)


def test_an_llm_read_from_its_config_is_an_unseen_llm_even_in_a_trained_architecture(catalog):
    """Its figures equal Qwen2.5-14B-Instruct's, which the model trained on: a coincidence of
    the count's rounding for most configs, so it is not taken for a measured LLM."""
    trained = pd.DataFrame([{**QUERY, "model": "Qwen/Qwen2.5-14B-Instruct"}])
    seen = Seen.of(build_features(check_query_columns(trained, catalog), catalog))
    asked = pd.DataFrame(
        [
            {**QUERY, "model": "Qwen/Qwen2.5-14B-Instruct"},
            {**QUERY, "model": CODER, "model_config": coder_text()},
        ]
    )
    rows = build_features(check_query_columns(asked, catalog), catalog)
    assert seen.unseen(rows)[UNSEEN_LLM].tolist() == [False, True]
    warnings = domain_warnings(rows, {})
    assert "LLM read from its config.json, not from the catalogue" in warnings[1]
    assert "config.json" not in warnings[0] and "described by its specs" not in warnings[1]


# --- the Hugging Face Hub: the cache offline, and a refusal without one --------------------------


def _offline(tmp_path: Path) -> dict:
    return {**os.environ, "HF_HUB_OFFLINE": "1", "HF_HOME": str(tmp_path / "hf")}


@pytest.mark.parametrize("command", ["predict", "recommend"])
def test_a_hub_id_offline_without_a_cached_config_is_refused_naming_model_config(tmp_path, command):
    args = ["--model", "acme/not-in-the-catalogue-7b", "--concurrency", "8"]
    if command == "predict":
        args += ["--gpu", "NVIDIA A10"]
    done = subprocess.run(
        [sys.executable, "-m", "wattgpu", command, *args],
        env=_offline(tmp_path),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 1, done.stderr
    assert done.stdout == ""
    assert done.stderr == (
        "Error: LLM 'acme/not-in-the-catalogue-7b' is not in the catalogue and its config.json "
        "cannot be read: the Hugging Face Hub is out of reach (offline) and the cache holds no "
        "copy; give the model's config.json with --model-config PATH\n"
    )


READ = "from wattgpu.data.hub import hub_config; print(hub_config"


def _closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def test_the_hub_counts_as_out_of_reach_only_when_its_host_takes_no_connection(monkeypatch):
    from huggingface_hub import constants

    from wattgpu.data.hub import _hub_reachable

    for proxy in ("HTTPS_PROXY", "https_proxy", "ALL_PROXY", "all_proxy"):
        monkeypatch.delenv(proxy, raising=False)
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        monkeypatch.setattr(constants, "ENDPOINT", f"http://127.0.0.1:{server.getsockname()[1]}")
        assert _hub_reachable()
    monkeypatch.setattr(constants, "ENDPOINT", f"http://127.0.0.1:{_closed_port()}")
    assert not _hub_reachable()
    # behind a proxy the host is not probed: the proxy may reach what this machine cannot
    monkeypatch.setenv("HTTPS_PROXY", "http://proxy.example:3128")
    assert _hub_reachable()


@pytest.mark.parametrize("offline", ["HF_HUB_OFFLINE", "a Hub host that takes no connection"])
def test_offline_the_config_comes_from_the_users_hub_cache(tmp_path, offline):
    """The cache as huggingface_hub lays it out: a snapshot per revision, a ref to it."""
    repo = tmp_path / "hf" / "hub" / "models--Qwen--Qwen2.5-Coder-14B-Instruct"
    revision = "0" * 40
    (repo / "refs").mkdir(parents=True)
    (repo / "refs" / "main").write_text(revision)
    (repo / "snapshots" / revision).mkdir(parents=True)
    (repo / "snapshots" / revision / "config.json").write_text(coder_text())
    unreachable = {
        **{k: v for k, v in os.environ.items() if "proxy" not in k.lower()},
        "HF_HOME": str(tmp_path / "hf"),
        "HF_ENDPOINT": f"http://127.0.0.1:{_closed_port()}",
    }
    done = subprocess.run(
        [sys.executable, "-c", f"{READ}({CODER!r}), end='')"],
        env=_offline(tmp_path) if offline == "HF_HUB_OFFLINE" else unreachable,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout == coder_text()


def test_a_local_config_file_or_model_folder_is_read(tmp_path):
    from wattgpu.data.hub import read_config_file

    (tmp_path / "config.json").write_text(coder_text())
    assert read_config_file(tmp_path) == read_config_file(tmp_path / "config.json") == coder_text()
    with pytest.raises(DataError, match=r"^model config not found: .*nope.json \(give a model's"):
        read_config_file(tmp_path / "nope.json")


def test_recommend_ranks_gpus_for_an_llm_read_from_its_config(small_catalog):
    from wattgpu import recommendation as rec

    asked = []

    def predictor(queries: pd.DataFrame, target: str) -> pd.DataFrame:
        asked.append(queries)
        value = np.full(len(queries), 100.0)
        return pd.DataFrame(
            {"prediction": value, "lower": value, "upper": value, "warnings": ""},
            index=queries.index,
        )

    table = rec.recommend(
        CODER,
        catalog=small_catalog,
        predictor=predictor,
        concurrency=8,
        model_config=config("Qwen--Qwen2.5-Coder-14B-Instruct"),
    )
    rows = {row["gpu"]: row for row in table.to_dict("records")}
    h100, l4 = rows["NVIDIA H100 SXM5"], rows["NVIDIA L4"]
    # 14.77 B weights (the count to two decimals, as a catalogue row holds it) x 2 B = 29.54 GB:
    # an 80 GB H100 holds them, a 24 GB L4 does not
    assert h100["weights_gb"] == pytest.approx(29.54)
    assert h100["rank"] == 1 and not l4["fits"]
    # KV cache: 2 x 8 KV heads x 128 x 2 B x 48 layers = 196,608 B a token; 8 users of 768
    assert h100["kv_cache_gb"] == pytest.approx(8 * 196608 * 768 / 1e9)
    # every query the models were asked carries the config (the served model reads it)
    sent = pd.concat(asked)
    assert set(sent["model"]) == {CODER}
    assert set(sent["model_config"]) == {json.dumps(config("Qwen--Qwen2.5-Coder-14B-Instruct"))}
    assert table.attrs["request"]["model"] == CODER
