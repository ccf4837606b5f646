"""Settings read once, at command start, from the environment (never at import time)."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

SHIPPED_DATA_DIR = Path(__file__).resolve().parent / "data" / "shipped"
"""The catalogues and the real measurements that ship inside the package (see its README.md)."""
EXTERNAL_DATA_DIR = Path("data") / "external"
"""Where ``wattgpu data fetch`` / ``import`` write by default, relative to the working directory."""
DEFAULT_TRACKING_URI = "sqlite:///mlflow.db"
DEFAULT_OPTUNA_STORAGE = "sqlite:///optuna.db"


@dataclass(frozen=True)
class Settings:
    """Where data, runs and studies live.

    Attributes:
        data_dir: folder holding ``gpus.csv``, ``llms.csv`` and ``measurements/`` (default: the
            copy shipped inside the package, so commands work from any directory).
        tracking_uri: MLflow tracking URI.
        optuna_storage: default Optuna storage URL.

    """

    data_dir: Path = SHIPPED_DATA_DIR
    tracking_uri: str = DEFAULT_TRACKING_URI
    optuna_storage: str = DEFAULT_OPTUNA_STORAGE

    @property
    def gpus_csv(self) -> Path:
        """The GPU catalogue."""
        return self.data_dir / "gpus.csv"

    @property
    def llms_csv(self) -> Path:
        """The LLM catalogue."""
        return self.data_dir / "llms.csv"

    @property
    def measurements_dir(self) -> Path:
        """The default measurement files."""
        return self.data_dir / "measurements"


def load_settings(environ: dict[str, str] | None = None, data_dir: Path | None = None) -> Settings:
    """Build the settings from environment variables; the CLI calls it once, at command start.

    ``WATTGPU_DATA_DIR`` (default: the data shipped with the package), ``MLFLOW_TRACKING_URI``
    (default an SQLite file ``mlflow.db`` in the working directory) and
    ``WATTGPU_OPTUNA_STORAGE`` (default ``sqlite:///optuna.db``).

    Args:
        environ: the variables to read (default: ``os.environ``).
        data_dir: a data folder given explicitly (``wattgpu --data-dir``); wins over the variable.

    """
    env = os.environ if environ is None else environ
    return Settings(
        data_dir=Path(data_dir or env.get("WATTGPU_DATA_DIR") or SHIPPED_DATA_DIR),
        tracking_uri=env.get("MLFLOW_TRACKING_URI") or DEFAULT_TRACKING_URI,
        optuna_storage=env.get("WATTGPU_OPTUNA_STORAGE") or DEFAULT_OPTUNA_STORAGE,
    )
