"""The names the served models are registered under (no MLflow import: `predict` reads them)."""

from __future__ import annotations

from wattgpu.errors import ModelNotFound


def model_name(target: str) -> str:
    """Registered model name of a target."""
    return f"wattgpu-{target}"


def no_alias(target: str, alias: str, store: str) -> ModelNotFound:
    """The error of a ``target`` with no version holding ``alias`` in ``store`` (for messages)."""
    return ModelNotFound(
        f"{model_name(target)} has no version with alias {alias!r} in {store}; "
        f"run `wattgpu main`, or register one (`wattgpu register --target {target}`) and "
        f"promote it (`wattgpu promote --target {target} --version N --to {alias}`)"
    )
