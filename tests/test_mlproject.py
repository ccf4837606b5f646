"""One name, one default: every MLproject parameter is a click option with the same default."""

from pathlib import Path

import yaml
from conftest import REPO

from wattgpu.cli import cli


def entry_points():
    return yaml.safe_load((REPO / "MLproject").read_text())["entry_points"]


def test_every_entry_point_calls_a_command_with_matching_option_names_and_defaults():
    for name, entry in entry_points().items():
        words = entry["command"].split()
        assert words[:3] == ["python", "-m", "wattgpu"], name
        command = cli.commands[words[3]]
        options = {p.name: p for p in command.params}
        for param, spec in entry.get("parameters", {}).items():
            assert f"{{{param}}}" in entry["command"], f"{name}: parameter {param} is ignored"
            assert param in options, f"{name}: no click option --{param}"
            default = options[param].default
            if param == "data":
                # "" is "no --data": the settings' measurement folder (the shipped data)
                assert spec["default"] == "" and options[param].multiple
            elif "default" not in spec:
                assert options[param].required, f"{name}.{param}: required in MLproject only"
            elif isinstance(default, Path):
                assert spec["default"] == str(default), f"{name}.{param}"
            elif isinstance(default, (int, float)):
                assert float(spec["default"]) == float(default), f"{name}.{param}"
            else:
                assert spec["default"] == default, f"{name}.{param}"


def test_conda_env_pins_an_exact_python():
    conda = yaml.safe_load((REPO / "conda.yaml").read_text())
    assert "python=3.11.7" in conda["dependencies"]
