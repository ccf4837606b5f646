"""``python -m wattgpu`` runs the CLI (what the MLproject entry points call)."""

from wattgpu.cli import main

main()
