"""The CLI: help everywhere, and one clear line (no traceback) for each user mistake."""

from __future__ import annotations

import click
import pandas as pd
import pytest
from click.testing import CliRunner

from wattgpu.cli import cli
from wattgpu.config import SHIPPED_DATA_DIR

GOOD_ROWS = [
    # gpu and model as measurement files write them; numbers are plausible, not real
    (
        "NVIDIA H100 80GB HBM3",
        "meta-llama/Meta-Llama-3.1-8B-Instruct",
        "offline",
        None,
        32,
        550.0,
        0.012,
    ),
    (
        "NVIDIA A100-SXM4-40GB",
        "meta-llama/Llama-3.1-8B-Instruct",
        "server",
        1.0,
        None,
        250.0,
        0.020,
    ),
    ("Tesla T4", "Qwen/Qwen2.5-1.5B-Instruct", "offline", None, 8, 65.0, 0.030),
]


def write_measurements(path, rows=GOOD_ROWS):
    columns = [
        "gpu",
        "model",
        "scenario",
        "request_rate_rps",
        "batch_size",
        "mean_power_w",
        "itl_s",
    ]
    pd.DataFrame(rows, columns=columns).to_csv(path, index=False)
    return path


@pytest.fixture
def run(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"sqlite:///{tmp_path / 'mlflow.db'}")
    monkeypatch.setenv("WATTGPU_DATA_DIR", str(SHIPPED_DATA_DIR))

    def invoke(*args):
        result = CliRunner().invoke(cli, list(args), catch_exceptions=False)
        assert "Traceback" not in result.output
        return result

    return invoke


def all_commands(group, prefix=()):
    """Every command and subcommand below ``group``, as (path, command), recursively."""
    for name, command in group.commands.items():
        yield (*prefix, name), command
        if isinstance(command, click.Group):
            yield from all_commands(command, (*prefix, name))


COMMANDS = dict(all_commands(cli))


def test_the_walk_reaches_nested_subcommands():
    assert {("data", "import", "argonne"), ("data", "fetch"), ("promote",)} <= set(COMMANDS)


@pytest.mark.parametrize("path", [(), *COMMANDS], ids=lambda path: " ".join(path) or "wattgpu")
def test_every_command_has_help(run, path):
    result = run(*path, "--help")
    assert result.exit_code == 0, path
    assert result.output.startswith(f"Usage: cli {' '.join(path)}".rstrip())
    command = COMMANDS.get(path, cli)
    assert len(command.help or "") > 10, path
    for param in command.params:
        if isinstance(param, click.Option):
            assert param.help, f"{path}: {param.opts} has no help"


def options_named(flag):
    return {
        path: param
        for path, command in COMMANDS.items()
        for param in command.params
        if flag in getattr(param, "opts", ())
    }


def test_format_means_the_same_everywhere():
    formats = options_named("--format")
    assert {"evaluate", "models", "predict", "recommend"} <= {path[0] for path in formats}
    for path, option in formats.items():
        assert list(option.type.choices) == ["table", "json", "csv"], path
        assert option.default == "table", path


def test_target_is_an_option_everywhere_with_one_vocabulary():
    for path, command in COMMANDS.items():
        arguments = [p.name for p in command.params if isinstance(p, click.Argument)]
        assert "target" not in arguments, path
    targets = options_named("--target")
    assert {"tune", "evaluate", "register", "promote", "models", "serve", "predict"} <= {
        path[0] for path in targets
    }
    for path, option in targets.items():
        every = {"power", "itl", "ttft"}
        assert set(option.type.choices) in (every, every | {"both"}), path
        if not option.required:
            expected = "both" if "both" in option.type.choices else "power"
            assert option.default == expected, path


def test_run_id_defaults_to_none_and_timeout_is_only_an_http_timeout():
    for path, option in options_named("--run-id").items():
        assert option.default is None, path
    assert set(options_named("--timeout")) == {("data", "fetch")}
    assert {path for path in options_named("--time-budget")} == {("tune",), ("main",)}


@pytest.mark.parametrize(
    ("path", "flag"),
    [
        (("predict",), "--batch-size"),
        (("predict",), "--input-tokens"),
        (("predict",), "--output-tokens"),
        (("predict",), "--num-gpus"),
        (("predict",), "--engine-year"),
        (("recommend",), "--output-tokens"),
        (("recommend",), "--input-tokens"),
        (("tune",), "--trials"),
        (("tune",), "--seed"),
        (("main",), "--trials"),
        (("evaluate",), "--version"),
        (("promote",), "--version"),
        (("data", "synthesize"), "--seed"),
    ],
)
def test_whole_numbers_are_integers(path, flag):
    (option,) = [p for p in COMMANDS[path].params if flag in p.opts]
    assert option.type.convert("3", option, None) == 3
    with pytest.raises(click.BadParameter, match="not a valid integer"):
        option.type.convert("3.5", option, None)


def test_promote_takes_the_target_as_an_option(run):
    old_form = run("promote", "power", "--version", "1", "--to", "staging")
    assert old_form.exit_code == 2 and "Missing option '--target'" in old_form.output
    args = ["--target", "power", "--version", "1", "--to", "staging"]
    assert COMMANDS[("promote",)].make_context("promote", args).params["target"] == "power"


def test_an_error_in_a_nested_command_is_one_line_from_the_root_handler(run, tmp_path):
    (tmp_path / "raw").mkdir()
    result = run("data", "import", "mlenergy", str(tmp_path / "raw"))
    assert result.exit_code == 1
    assert result.output.strip().splitlines()[-1].startswith("Error: ")


def test_unknown_target_is_a_usage_error(run):
    result = run("tune", "--target", "energy")
    assert result.exit_code == 2
    assert "'energy' is not one of 'power', 'itl'" in result.output


@pytest.mark.parametrize("asked", ["bogus", "ttft=fast", "gpu=simulated", "ttft=simulated,"])
def test_a_prior_that_names_no_prior_or_target_is_a_usage_error_in_one_line(run, asked):
    for command in (("main",), ("tune", "--target", "ttft")):
        result = run(*command, "--prior", asked)
        assert result.exit_code == 2
        line = result.output.strip().splitlines()[-1]
        assert line == (
            "Error: Invalid value for '--prior': prior must be one of closed-form, simulated "
            "or TARGET=PRIOR pairs joined by commas, TARGET one of power, itl, ttft; "
            f"got '{asked}'"
        )


def test_missing_data_file(run):
    result = run("validate", "--data", "nope.csv")
    assert result.exit_code == 1
    assert (
        result.output.strip().splitlines()[-1]
        == "Error: measurement file not found: nope.csv (give a CSV file or a folder of them)"
    )


def test_csv_missing_a_column(run, tmp_path):
    path = tmp_path / "m.csv"
    pd.read_csv(write_measurements(path)).drop(columns=["itl_s"]).to_csv(path, index=False)
    result = run("tune", "--target", "itl", "--data", str(path))
    assert result.exit_code == 1
    assert "lacks column(s) itl_s" in result.output


def test_text_in_a_numeric_column(run, tmp_path):
    path = tmp_path / "m.csv"
    frame = pd.read_csv(write_measurements(path))
    frame["mean_power_w"] = frame["mean_power_w"].astype(str)
    frame.loc[1, "mean_power_w"] = "lots"
    frame.to_csv(path, index=False)
    result = run("validate", "--data", str(path))
    assert result.exit_code == 1
    assert "column mean_power_w must be numeric, got 'lots' (row 3)" in result.output


@pytest.mark.slow  # validates twice with Great Expectations and starts a tuning job: ~10 s
def test_gpu_that_resolves_nowhere(run, tmp_path):
    path = write_measurements(
        tmp_path / "m.csv", [*GOOD_ROWS, ("NVIDIA Z9000", "gpt2", "offline", None, 1, 50.0, 0.01)]
    )
    result = run("validate", "--data", str(path), "--docs-dir", str(tmp_path / "docs"))
    assert result.exit_code == 1
    assert "FAIL" in result.output and "NVIDIA Z9000" in result.output
    assert (tmp_path / "docs" / "index.html").is_file()
    tuned = run("tune", "--target", "power", "--trials", "1", "--data", str(path))
    assert tuned.exit_code == 1
    last = tuned.output.strip().splitlines()[-1]
    assert (
        last.startswith("Error: data validation failed")
        and "NVIDIA Z9000" in last
        and "nothing was trained" in last
    )


def test_valid_data_passes_validation(run, tmp_path):
    path = str(write_measurements(tmp_path / "m.csv"))
    result = run("validate", "--data", path)
    assert result.exit_code == 0, result.output
    assert "FAIL " not in result.output and "PASS " not in result.output  # the summary only
    assert "expectations: " in result.output and "all passed" in result.output
    verbose = run("validate", "--data", path, "--verbose")
    assert verbose.exit_code == 0 and "PASS  measurements" in verbose.output


def test_storage_that_cannot_be_opened(run, tmp_path):
    path = write_measurements(tmp_path / "m.csv")
    result = run(
        "tune",
        "--target",
        "power",
        "--data",
        str(path),
        "--storage",
        "sqlite:////no/such/dir/optuna.db",
    )
    assert result.exit_code == 1
    assert "cannot open Optuna storage 'sqlite:////no/such/dir/optuna.db'" in result.output


def test_settings_are_built_once_at_the_root_and_reach_nested_commands(run, monkeypatch, tmp_path):
    import wattgpu.cli as cli_module

    calls = []
    real = cli_module.load_settings
    monkeypatch.setattr(cli_module, "load_settings", lambda **kw: calls.append(kw) or real(**kw))
    nowhere = tmp_path / "nowhere"
    result = run("--data-dir", str(nowhere), "data", "synthesize", "--output", "out.csv")
    assert result.exit_code == 1 and str(nowhere) in result.output.strip().splitlines()[-1]
    assert calls == [{"data_dir": nowhere}]


def test_predict_options_state_a_server_load_as_concurrent_users():
    from wattgpu.cli import _in_option_names, _query_from_options

    options = {"gpu": "A10", "llm": "meta-llama/Llama-3.1-8B-Instruct", "scenario": "server"}
    options |= {"rate": None, "concurrency": 16, "batch_size": None, "input_tokens": None}
    options |= {"output_tokens": None, "engine": None, "engine_version": None, "engine_year": None}
    options |= {"num_gpus": None, "dtype": None}
    query = _query_from_options(options)
    assert query.to_dict("records") == [
        {
            "gpu": "A10",
            "model": "meta-llama/Llama-3.1-8B-Instruct",
            "scenario": "server",
            "concurrency": 16,
        }
    ]
    message = "row 0: give request_rate_rps or concurrency for a server, not both"
    assert _in_option_names(message) == "give --rate or --concurrency for a server, not both"


def test_predict_options_state_the_client_and_engine_knobs_as_rest_columns():
    from wattgpu.cli import _in_option_names, _query_from_options

    options = {"gpu": "A10", "llm": "meta-llama/Llama-3.1-8B-Instruct", "scenario": "server"}
    options |= dict.fromkeys(("rate", "batch_size", "input_tokens", "output_tokens", "engine"))
    options |= dict.fromkeys(("engine_version", "engine_year", "num_gpus", "dtype"))
    options |= {"concurrency": 16, "client": "llm-pilot", "max_num_seqs": 8}
    options |= {"max_batched_tokens": None, "chunked_prefill": "off"}
    (row,) = _query_from_options(options).to_dict("records")
    assert {k: row[k] for k in ("client", "max_num_seqs", "chunked_prefill")} == {
        "client": "llm-pilot",
        "max_num_seqs": 8,
        "chunked_prefill": "off",
    }
    assert "max_batched_tokens" not in row  # not given: the engine's own
    message = "row 0: max_batched_tokens must be a whole number from 16 to 1048576; got 8"
    assert _in_option_names(message) == (
        "--max-batched-tokens must be a whole number from 16 to 1048576; got 8"
    )


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (("--max-num-seqs", "2.5"), "Invalid value for '--max-num-seqs': '2.5' is not a valid"),
        (("--chunked-prefill", "maybe"), "Invalid value for '--chunked-prefill': 'maybe' is not"),
    ],
)
def test_engine_knobs_of_the_wrong_kind_are_refused_before_any_model(run, args, expected):
    result = run("predict", "--gpu", "A10", "--model", "meta-llama/Llama-3.1-8B-Instruct", *args)
    assert result.exit_code == 2
    assert result.output.strip().splitlines()[-1].startswith(f"Error: {expected}")
