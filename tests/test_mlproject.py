"""One name, one default: the MLproject entry points and the click commands they run agree.

Both ways: every MLproject parameter is a click option of its command with the same default and
a suitable type, and every click option of that command is an MLproject parameter. The values
MLproject can only spell as strings follow the CLI's rules: "" is "not given" (``None``, or no
``--data``), yes/no options take "true"/"false", whole numbers are declared ``float``.
"""

import shlex
from pathlib import Path

import click
import pytest
import yaml
from click.testing import CliRunner
from conftest import REPO

from wattgpu.cli import cli

MLPROJECT_TYPES = {"string", "float", "path", "uri"}


def entry_points():
    return yaml.safe_load((REPO / "MLproject").read_text())["entry_points"]


def command_of(entry: dict) -> click.Command:
    words = entry["command"].split()
    assert words[:3] == ["python", "-m", "wattgpu"]
    return cli.commands[words[3]]


def options_by_parameter(command: click.Command) -> dict[str, click.Option]:
    """The command's options under their MLproject names (``--docs-dir`` -> ``docs_dir``)."""
    options = {}
    for param in command.params:
        assert isinstance(param, click.Option), f"{command.name}: argument {param.name}"
        long = max(param.opts, key=len)
        options[long.removeprefix("--").replace("-", "_")] = param
    return options


def expected_type(option: click.Option) -> str:
    if isinstance(option.type, (click.types.IntParamType, click.types.FloatParamType)):
        return "float"  # MLproject has no integer type
    return "string"


def expected_default(option: click.Option):
    if option.multiple or option.default is None:
        return ""  # "" is "not given"
    if isinstance(option.default, Path):
        return str(option.default)
    return option.default


ENTRY_POINTS = sorted(entry_points())


@pytest.mark.parametrize("name", ENTRY_POINTS)
def test_every_parameter_is_an_option_with_its_default_and_type(name):
    entry = entry_points()[name]
    options = options_by_parameter(command_of(entry))
    for param, spec in entry.get("parameters", {}).items():
        assert param in options, f"{name}: no click option --{param.replace('_', '-')}"
        option = options[param]
        flag = max(option.opts, key=len)
        assert f"{flag} {{{param}}}" in entry["command"], f"{name}: {param} is not passed as {flag}"
        assert spec["type"] in MLPROJECT_TYPES, f"{name}.{param}: {spec['type']}"
        assert spec["type"] == expected_type(option), f"{name}.{param}: type"
        if "default" not in spec:
            assert option.required, f"{name}.{param}: required in MLproject only"
        else:
            assert not option.required, f"{name}.{param}: required in click only"
            assert spec["default"] == expected_default(option), f"{name}.{param}: default"


@pytest.mark.parametrize("name", ENTRY_POINTS)
def test_every_option_is_a_parameter(name):
    entry = entry_points()[name]
    missing = set(options_by_parameter(command_of(entry))) - set(entry.get("parameters", {}))
    assert not missing, f"{name}: click options missing from MLproject: {sorted(missing)}"


def test_what_mlflow_passes_for_an_unset_parameter_is_the_commands_own_default():
    # `mlflow run` quotes each value: an unset run_id arrives as '' and a yes/no as true/false
    from wattgpu.cli import register

    ctx = register.make_context("register", ["--target", "power", "--run-id", ""])
    assert ctx.params["run_id"] is None
    promote = cli.commands["promote"]
    args = ["--target", "itl", "--version", "3", "--to", "staging", "--force", "false"]
    assert promote.make_context("promote", args).params == {
        "target": "itl",
        "version": 3,
        "to": "staging",
        "force": False,
    }


def test_a_whole_number_given_as_a_fraction_is_refused_in_one_line():
    result = CliRunner().invoke(cli, ["tune", "--target", "power", "--trials", "2.5"])
    assert result.exit_code == 2
    assert result.output.strip().splitlines()[-1] == (
        "Error: Invalid value for '--trials': '2.5' is not a valid integer."
    )


def test_conda_env_pins_an_exact_python():
    conda = yaml.safe_load((REPO / "conda.yaml").read_text())
    assert "python=3.11.7" in conda["dependencies"]


REQUIRED = {"target": "itl", "version": "2", "to": "staging"}


@pytest.mark.parametrize("name", ENTRY_POINTS)
def test_an_unset_parameter_is_the_same_as_an_option_not_given(name):
    # MLflow's own substitution and quoting, then click's parser
    from mlflow.projects._project_spec import load_project

    entry = load_project(str(REPO)).get_entry_point(name)
    given = {k: v for k, v in REQUIRED.items() if k in entry.parameters}
    words = shlex.split(entry.compute_command(given, storage_dir=None))
    command = command_of(entry_points()[name])
    plain = [word for k, v in given.items() for word in (f"--{k}", v)]
    assert (
        command.make_context(words[3], words[4:]).params
        == command.make_context(words[3], plain).params
    )
