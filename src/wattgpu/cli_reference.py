"""The command reference, ``docs/commands.md``: every command's ``--help``, generated.

Regenerate it after changing a command (a test fails while it is out of date)::

    python -m wattgpu.cli_reference > docs/commands.md
"""

from __future__ import annotations

from collections.abc import Iterator

import click

from wattgpu.cli import cli

REGENERATE = "python -m wattgpu.cli_reference > docs/commands.md"
WIDTH = 100
"""Help text width, fixed so that the reference does not depend on the terminal."""


def _contexts(ctx: click.Context) -> Iterator[click.Context]:
    """``ctx``, then the context of every command below it, depth first, in name order."""
    yield ctx
    command = ctx.command
    if isinstance(command, click.Group):
        for name in command.list_commands(ctx):
            sub = command.get_command(ctx, name)
            if sub is not None and not sub.hidden:
                yield from _contexts(click.Context(sub, info_name=name, parent=ctx))


def command_reference() -> str:
    """Markdown holding the ``--help`` text of ``wattgpu`` and of every (sub)command."""
    root = click.Context(cli, info_name="wattgpu", terminal_width=WIDTH, max_content_width=WIDTH)
    parts = [
        "# Command reference\n",
        "The `--help` text of every `wattgpu` command. Generated; do not edit: "
        f"run `{REGENERATE}`.\n",
    ]
    for ctx in _contexts(root):
        with ctx:
            text = ctx.command.get_help(ctx)
        parts.append(f"## {ctx.command_path}\n\n```text\n{text}\n```\n")
    return "\n".join(parts)


if __name__ == "__main__":
    click.echo(command_reference(), nl=False)
