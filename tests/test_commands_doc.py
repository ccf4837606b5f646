"""docs/commands.md is the `--help` of every command, as `command_reference()` prints it."""

from conftest import REPO

from wattgpu.cli_reference import REGENERATE, command_reference


def test_command_reference_is_up_to_date():
    written = (REPO / "docs" / "commands.md").read_text(encoding="utf-8")
    assert written == command_reference(), f"docs/commands.md is out of date; run: {REGENERATE}"


def test_command_reference_holds_every_nested_command():
    reference = command_reference()
    for heading in ("## wattgpu\n", "## wattgpu data import argonne\n", "## wattgpu promote\n"):
        assert heading in reference
    assert "Usage: wattgpu promote [OPTIONS]" in reference
