"""Every option of `predict` and `recommend`, refused, in words a user reads.

Each refusal is checked against the rules of issue 44: a non-zero exit, one line (after click's
usage hint, for a usage mistake), no traceback; the option as typed (``--requests-per-day``, not
``requests_per_day``) or the value given; whole numbers whole (``-4``, not ``-4.0``); no path
inside the package; nothing cut (a long list ends in "and N more"). The models are the session's
real registry (tests/conftest.py), asked in process; nothing is mocked.
"""

from __future__ import annotations

import re

import click
import pytest
from click.testing import CliRunner
from conftest import free_port

from wattgpu.cli import PREDICT_OPTIONS, cli
from wattgpu.config import SHIPPED_DATA_DIR

pytestmark = pytest.mark.slow

LLM = "meta-llama/Llama-3.1-8B-Instruct"
TYPO = "meta-llama/Llama-3.1-8B-Instrct"
PREDICT = ("predict", "--gpu", "A10", "--model", LLM)
RECOMMEND = ("recommend", "--model", LLM)
# Flags: given, they are on; there is no value to refuse.
FLAGS = {"recommend": {"--strict", "--log", "--fleet"}}
# "{dir}" is a folder, "{port}" a port nobody listens on.
CASES = {
    "predict": [
        (
            "--gpu",
            ("predict", "--gpu", "A1O", "--model", LLM, "--rate", "1"),
            "--gpu 'A1O' is not in the catalogue; closest: NVIDIA A10, ",
        ),
        (
            "--gpu",
            ("predict", "--gpu", "MI300X", "--model", LLM, "--rate", "1"),
            "--gpu 'MI300X' is made by AMD: WattGPU models NVIDIA GPUs only",
        ),
        (
            "--model",
            ("predict", "--gpu", "A10", "--model", TYPO, "--rate", "1"),
            f"LLM '{TYPO}' is not in the catalogue and its config.json cannot be read: the "
            f"Hugging Face Hub is out of reach (offline) and the cache holds no copy; give the "
            f"model's config.json with --model-config PATH; or a catalogue LLM, closest: {LLM}, ",
        ),
        (
            "--model-config",
            ("predict", "--gpu", "A10", "--model-config", "{dir}/nothing.json", "--rate", "1"),
            "model config not found: {dir}/nothing.json (give a model's config.json)",
        ),
        ("--scenario", (*PREDICT, "--scenario", "batch"), "Invalid value for '--scenario'"),
        (
            "--rate",
            (*PREDICT, "--rate", "-1"),
            "--rate must be a number greater than 0 and at most 10000 requests/s; got -1",
        ),
        (
            "--rate",
            (*PREDICT, "--rate", "1", "--concurrency", "3"),
            "give --rate or --concurrency for a server, not both (got 1 requests/s and 3 users)",
        ),
        (
            "--concurrency",
            (*PREDICT, "--concurrency", "-4"),
            "--concurrency must be a whole number from 1 to 65536 concurrent users; got -4",
        ),
        (
            "--batch-size",
            (*PREDICT, "--scenario", "offline", "--batch-size", "-3"),
            "--batch-size must be a whole number from 1 to 65536; got -3",
        ),
        (
            "--input-tokens",
            (*PREDICT, "--rate", "1", "--input-tokens", "0"),
            "--input-tokens must be a whole number from 1 to 10000000; got 0",
        ),
        (
            "--client",
            (*PREDICT, "--rate", "1", "--client", "nobody"),
            "--client must be one of aiconfigurator, aiperf, argonne, batch, closed, llm-pilot, ",
        ),
        (
            "--client",
            (*PREDICT, "--concurrency", "4", "--client", "poisson"),
            "--client 'poisson' sends requests at a rate: give --rate for a server",
        ),
        (
            "--length-spread",
            (*PREDICT, "--rate", "1", "--length-spread", "3.5"),
            "--length-spread must be a number from 0 to 3 (sigma of a length's log; 0: equal); "
            "got 3.5",
        ),
        (
            "--length-spread",
            (*PREDICT, "--rate", "1", "--length-spread", "wide"),
            "Invalid value for '--length-spread': 'wide' is not a valid float",
        ),
        (
            "--max-num-seqs",
            (*PREDICT, "--rate", "1", "--max-num-seqs", "0"),
            "--max-num-seqs must be a whole number from 1 to 65536; got 0",
        ),
        (
            "--max-num-seqs",
            (*PREDICT, "--rate", "1", "--max-num-seqs", "2.5"),
            "Invalid value for '--max-num-seqs': '2.5' is not a valid integer",
        ),
        (
            "--max-batched-tokens",
            (*PREDICT, "--rate", "1", "--max-batched-tokens", "8"),
            "--max-batched-tokens must be a whole number from 16 to 1048576; got 8",
        ),
        (
            "--chunked-prefill",
            (*PREDICT, "--rate", "1", "--chunked-prefill", "maybe"),
            "Invalid value for '--chunked-prefill': 'maybe' is not one of 'on', 'off'",
        ),
        (
            "--output-tokens",
            (*PREDICT, "--rate", "1", "--output-tokens", "-2"),
            "--output-tokens must be a whole number from 1 to 10000000; got -2",
        ),
        (
            "--engine",
            (*PREDICT, "--rate", "1", "--engine", "x" * 201),
            "--engine must be at most 200 characters; got 201",
        ),
        (
            "--engine-version",
            (*PREDICT, "--rate", "1", "--engine-version", "9.9"),
            "--engine-version must be a release of vllm with a known date (nightly, 0.19, ",
        ),
        (
            "--engine-year",
            (*PREDICT, "--rate", "1", "--engine-year", "1990"),
            "--engine-year must be a whole number from 2000 to 2100; got 1990",
        ),
        (
            "--num-gpus",
            (*PREDICT, "--rate", "1", "--num-gpus", "0"),
            "--num-gpus must be a whole number from 1 to 1024; got 0",
        ),
        (
            "--dtype",
            (*PREDICT, "--rate", "1", "--dtype", "fp3"),
            "--dtype must be one of float32, fp32, float16, fp16, bfloat16, bf16, fp8, float8, "
            "int8, int4, mxfp4, nvfp4, fp8_block, int4_wo; got 'fp3'",
        ),
        (
            "--input",
            ("predict", "--input", "{dir}"),
            "query file {dir} is a directory; give a CSV file of query rows: gpu, model, "
            "scenario and the load",
        ),
        (
            "--input",
            ("predict", "--input", "{dir}/nope.csv"),
            "query file not found: {dir}/nope.csv",
        ),
        (
            "--output",
            (*PREDICT, "--rate", "1", "--output", "{dir}"),
            "cannot use {dir}: Is a directory",
        ),
        (
            "--target",
            (*PREDICT, "--rate", "1", "--target", "energy"),
            "Invalid value for '--target'",
        ),
        (
            "--alias",
            (*PREDICT, "--rate", "1", "--alias", "nope"),
            "wattgpu-power has no version with alias 'nope'",
        ),
        (
            "--url",
            (*PREDICT, "--rate", "1", "--url", "http://127.0.0.1:{port}"),
            "--url serves one model: give one --target (power, itl or ttft)",
        ),
        (
            "--url",
            (*PREDICT, "--rate", "1", "--target", "itl", "--url", "http://127.0.0.1:{port}"),
            "cannot reach the model server at http://127.0.0.1:{port}/invocations",
        ),
        ("--format", (*PREDICT, "--rate", "1", "--format", "xml"), "Invalid value for '--format'"),
    ],
    "recommend": [
        (
            "--model",
            ("recommend", "--model", TYPO, "--rate", "1"),
            f"LLM '{TYPO}' is not in the catalogue and its config.json cannot be read: the "
            f"Hugging Face Hub is out of reach (offline) and the cache holds no copy; give the "
            f"model's config.json with --model-config PATH; or a catalogue LLM, closest: {LLM}, ",
        ),
        (
            "--model-config",
            ("recommend", "--model-config", "{dir}", "--rate", "1"),
            "model config {dir} is a folder without a config.json",
        ),
        (
            "--itl-slo-ms",
            (*RECOMMEND, "--rate", "1", "--itl-slo-ms", "-3"),
            "--itl-slo-ms must be a finite number > 0; got -3",
        ),
        (
            "--ttft-slo-ms",
            (*RECOMMEND, "--rate", "1", "--ttft-slo-ms", "0"),
            "--ttft-slo-ms must be a finite number > 0; got 0",
        ),
        (
            "--slo-percentile",
            (*RECOMMEND, "--rate", "1", "--itl-slo-ms", "50", "--slo-percentile", "95"),
            "--slo-percentile must be one of 50, 90, 99; got 95",
        ),
        (
            "--scenario",
            (*RECOMMEND, "--rate", "1", "--scenario", "batch"),
            "Invalid value for '--scenario'",
        ),
        ("--rate", (*RECOMMEND, "--rate", "0"), "--rate must be a finite number > 0; got 0"),
        (
            "--requests-per-day",
            (*RECOMMEND, "--requests-per-day", "-5"),
            "--requests-per-day must be a finite number > 0; got -5",
        ),
        (
            "--requests-per-day",
            (*RECOMMEND, "--rate", "1", "--requests-per-day", "9"),
            "give one load, not --rate and --requests-per-day",
        ),
        (
            "--load-profile",
            (*RECOMMEND, "--load-profile", "{dir}"),
            "load profile {dir} is a directory; give a CSV file with columns hour, rate",
        ),
        (
            "--concurrency",
            (*RECOMMEND, "--concurrency", "-4"),
            "--concurrency must be a finite number > 0; got -4",
        ),
        (
            "--concurrency",
            (*RECOMMEND, "--concurrency", "4", "--scenario", "offline"),
            "--concurrency applies to a server only",
        ),
        (
            "--client",
            (*RECOMMEND, "--concurrency", "4", "--client", "poisson"),
            "--client 'poisson' sends requests at a rate: give --rate for a server",
        ),
        (
            "--length-spread",
            (*RECOMMEND, "--rate", "1", "--length-spread", "-0.5"),
            "--length-spread must be a number from 0 to 3 (sigma of a length's log; 0: equal); "
            "got -0.5",
        ),
        (
            "--max-num-seqs",
            (*RECOMMEND, "--rate", "1", "--max-num-seqs", "0"),
            "--max-num-seqs must be a whole number from 1 to 65536; got 0",
        ),
        (
            "--max-batched-tokens",
            (*RECOMMEND, "--rate", "1", "--max-batched-tokens", "1048577"),
            "--max-batched-tokens must be a whole number from 16 to 1048576; got 1048577",
        ),
        (
            "--chunked-prefill",
            (*RECOMMEND, "--rate", "1", "--chunked-prefill", "maybe"),
            "Invalid value for '--chunked-prefill': 'maybe' is not one of 'on', 'off'",
        ),
        (
            "--output-tokens",
            (*RECOMMEND, "--rate", "1", "--output-tokens", "0"),
            "--output-tokens must be a finite number > 0; got 0",
        ),
        (
            "--input-tokens",
            (*RECOMMEND, "--rate", "1", "--input-tokens", "2.5"),
            "Invalid value for '--input-tokens': '2.5' is not a valid integer",
        ),
        (
            "--gpus",
            (*RECOMMEND, "--rate", "1", "--gpus", "H100,L5"),
            "--gpus 'L5' is not in the catalogue; closest: NVIDIA L4",
        ),
        (
            "--gpus",
            (*RECOMMEND, "--rate", "1", "--gpus", "Gaudi 3"),
            "--gpus 'Gaudi 3' is made by Intel: WattGPU models NVIDIA GPUs only",
        ),
        (
            "--price-file",
            (*RECOMMEND, "--rate", "1", "--price-file", "{dir}"),
            "price file {dir} is a directory; give a CSV file with columns gpu, usd_per_hour",
        ),
        (
            "--alias",
            (*RECOMMEND, "--rate", "1", "--alias", "nope"),
            "wattgpu-power has no version with alias 'nope'",
        ),
        (
            "--power-url",
            (*RECOMMEND, "--rate", "1", "--power-url", "http://127.0.0.1:{port}"),
            "cannot reach the model server at http://127.0.0.1:{port}/invocations",
        ),
        (
            "--itl-url",
            (*RECOMMEND, "--rate", "1", "--itl-url", "http://127.0.0.1:{port}"),
            "cannot reach the model server at http://127.0.0.1:{port}/invocations",
        ),
        (
            "--format",
            (*RECOMMEND, "--rate", "1", "--format", "xml"),
            "Invalid value for '--format'",
        ),
        (
            "--plot",
            (*RECOMMEND, "--rate", "1", "--plot", "{dir}"),
            "cannot use {dir}: Is a directory",
        ),
        (
            "--engine",
            (*RECOMMEND, "--rate", "1", "--engine", "x" * 201),
            "--engine must be at most 200 characters; got 201",
        ),
        (
            "--engine-version",
            (*RECOMMEND, "--rate", "1", "--engine-version", "9.9"),
            "--engine-version must be a release of vllm with a known date (nightly, 0.19, ",
        ),
        (
            "--engine-year",
            (*RECOMMEND, "--rate", "1", "--engine-year", "1990"),
            "--engine-year must be a whole number from 2000 to 2100; got 1990",
        ),
        (
            "--dtype",
            (*RECOMMEND, "--rate", "1", "--dtype", "fp3"),
            "--dtype must be one of float32, fp32, float16, fp16, bfloat16, bf16, fp8, float8, "
            "int8, int4, mxfp4, nvfp4, fp8_block, int4_wo; got 'fp3'",
        ),
        (
            "--tp",
            (*RECOMMEND, "--rate", "1", "--tp", "1,3"),
            "--tp must be powers of two: 1, 2, 4, 8, 16, 32, 64; got '3'",
        ),
        (
            "--max-gpus",
            (*RECOMMEND, "--rate", "1", "--max-gpus", "0"),
            "--max-gpus must be a whole number from 1; got 0",
        ),
        (
            "--scaling",
            (*RECOMMEND, "--rate", "1", "--scaling", "daily"),
            "--scaling must be one of static, hourly; got 'daily'",
        ),
        (
            "--rank-by",
            (*RECOMMEND, "--rate", "1", "--rank-by", "cost"),
            "--rank-by cost needs prices: give --price-file",
        ),
    ],
}
WHOLE_AS_FLOAT = re.compile(r"(?<![\w.])-?\d+\.0(?![\d.])|\d[eE][+-]?\d")
INSIDE_THE_PACKAGE = ("data/", "shipped_data", "site-packages", "wattgpu/", ".py")
USAGE_HINT = re.compile(r"^(Usage: |Try '.*' for help\.$)")


def option_flags(command: str) -> set[str]:
    params = cli.commands[command].params
    return {p.opts[0] for p in params if isinstance(p, click.Option)} - {"--help"}


def code_names(command: str) -> set[str]:
    """The Python names behind the command's options, and the REST columns behind predict's."""
    params = cli.commands[command].params
    names = {p.name for p in params if p.name and p.opts[0] != f"--{p.name}"}
    return names | ({c for c in PREDICT_OPTIONS if "_" in c} if command == "predict" else set())


@pytest.mark.parametrize("command", sorted(CASES))
def test_the_walk_refuses_every_option(command):
    flags = FLAGS.get(command, set())
    assert all(p.is_flag for p in cli.commands[command].params if p.opts[0] in flags)
    assert {option for option, _, _ in CASES[command]} | flags == option_flags(command)


@pytest.fixture(autouse=True)
def hub_offline(monkeypatch, tmp_path):
    """The Hugging Face Hub offline with an empty cache, wherever the tests run.

    huggingface_hub reads HF_HUB_OFFLINE when imported, so its constants are set instead.
    """
    from huggingface_hub import constants

    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(tmp_path / "hf-cache"))


@pytest.fixture(scope="module")
def runner(store, tmp_path_factory):
    env = {"MLFLOW_TRACKING_URI": store["settings"].tracking_uri}
    env |= {"WATTGPU_DATA_DIR": str(SHIPPED_DATA_DIR)}
    return CliRunner(env=env), tmp_path_factory.mktemp("a-folder"), free_port()


@pytest.mark.parametrize(
    ("command", "option", "args", "expected"),
    [(command, *case) for command, cases in CASES.items() for case in cases],
    ids=[
        f"{command} {case[0]} {i}"
        for command, cases in CASES.items()
        for i, case in enumerate(cases)
    ],
)
def test_each_refusal_reads_as_a_user_typed_it(runner, command, option, args, expected):
    invoke, folder, port = runner
    fill = {"dir": str(folder), "port": str(port)}
    args = [a.format(**fill) for a in args]
    result = invoke.invoke(cli, args, catch_exceptions=False)
    assert result.exit_code in (1, 2), result.output
    assert "Traceback" not in result.output
    lines = [line for line in result.output.splitlines() if line and not USAGE_HINT.match(line)]
    assert len(lines) == 1 and lines[0].startswith("Error: "), result.output
    message = lines[0].removeprefix("Error: ")
    assert expected.format(**fill) in message
    given = args[args.index(option) + 1] if option in args else ""
    assert option in message or repr(given) in message or given in message, message
    # a code name alone, not part of a hyphenated value (the client "llm-pilot" is no ``llm``)
    code = [n for n in code_names(command) if re.search(rf"(?<![\w-]){n}(?![\w-])", message)]
    assert not code, f"{message!r} names {code}"
    assert not WHOLE_AS_FLOAT.search(message), message
    assert not any(part in message for part in INSIDE_THE_PACKAGE), message
    assert "..." not in message and "…" not in message, message


def test_a_long_list_of_releases_is_counted_not_cut(runner):
    invoke, _, _ = runner
    result = invoke.invoke(cli, [*PREDICT, "--rate", "1", "--engine-version", "9.9"])
    message = result.output.strip().removeprefix("Error: ")
    shown = message.split("(", 1)[1].split(";", 1)[0]
    assert re.fullmatch(
        r"nightly, 0\.19, 0\.18, 0\.17, 0\.16, 0\.15, 0\.14, 0\.13 and \d+ more", shown
    )
    assert message.endswith("; or give --engine-year); got '9.9'")
