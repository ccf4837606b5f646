"""Settings read once, at command start, from the environment (never at import time)."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from wattgpu.errors import ConfigError

_PACKAGE_DIR = Path(__file__).resolve().parent


def _top_level_folder(name: str) -> Path:
    """The repository's top-level folder ``name`` (``data``, ``expectations``), wherever it is.

    It is the single source. A wheel carries it inside the package as ``wattgpu/shipped_NAME``
    (pyproject's ``package-dir`` maps it there); a source checkout, editable install included,
    reads the folder itself, two levels above this file.
    """
    installed = _PACKAGE_DIR / f"shipped_{name}"
    return installed if installed.is_dir() else _PACKAGE_DIR.parents[1] / name


SHIPPED_DATA_DIR = _top_level_folder("data")
"""The catalogues and the real measurements that ship with WattGPU (see its README.md)."""
EXPECTATIONS_DIR = _top_level_folder("expectations")
"""The Great Expectations suites, one JSON file per table."""
EXAMPLE_QUERIES = _top_level_folder("examples") / "queries.csv"
"""An example query file for ``wattgpu predict --input`` (the README points at it)."""
EXTERNAL_DATA_DIR = Path("data") / "external"
"""Where ``wattgpu data fetch`` / ``import`` write by default, relative to the working directory."""
DEFAULT_HOME = Path("~/.wattgpu")
"""Where runs, models and studies live unless ``WATTGPU_HOME`` or the store variables say."""
RECIPES = ("full", "fast")
"""How models are built (``modeling.learning.recipe``): full, as served, or fast, for tests."""
DEFAULT_RECIPE = "full"
"""The recipe unless ``--recipe`` or ``WATTGPU_RECIPE`` says."""
# What a recipe's targets are relative to (``modeling.serving.prior``): the closed-form serving
# regimes or each row's serving loop simulated.
PRIORS = ("closed-form", "simulated")
CLOSED_FORM, SIMULATED = PRIORS
# Each target's prior unless one is asked for. TTFT's model is better on the simulation on every
# split, but its intervals are wider and its main job 8 times longer: the closed form stays its
# default until those are cut (docs/model.md, "The TTFT terms in the simulated prior").
TARGET_PRIORS = {"power": CLOSED_FORM, "itl": CLOSED_FORM, "ttft": CLOSED_FORM}


def target_prior(target: str, prior: str | None = None) -> str:
    """The prior ``target`` trains on: as asked, else its own (``TARGET_PRIORS``).

    ``prior``: one prior for every target (``simulated``), or ``TARGET=PRIOR`` pairs joined by
    commas (``ttft=simulated``): a target it does not name keeps its own.

    Raises:
        ConfigError: an unknown prior, or a pair that names no known target or prior.

    """
    if not prior:
        return TARGET_PRIORS.get(target, CLOSED_FORM)
    refusal = ConfigError(
        f"prior must be one of {', '.join(PRIORS)} or TARGET=PRIOR pairs joined by commas, "
        f"TARGET one of {', '.join(TARGET_PRIORS)}; got {prior!r}"
    )
    if "=" not in prior:
        if prior not in PRIORS:
            raise refusal
        return prior
    asked = {}
    for pair in prior.split(","):
        name, _, value = (part.strip() for part in pair.partition("="))
        if name not in TARGET_PRIORS or value not in PRIORS:
            raise refusal
        asked[name] = value
    return asked.get(target, TARGET_PRIORS.get(target, CLOSED_FORM))


MLFLOW_JOB_RUNNERS = "MLFLOW_SERVER_ENABLE_JOB_EXECUTION"
"""MLflow's switch of the job runners its tracking server starts (five processes in 3.17), which
WattGPU never uses: ``wattgpu ui`` turns them off unless the variable is set."""


@dataclass(frozen=True)
class Settings:
    """Where data, runs and studies live.

    Attributes:
        data_dir: folder holding ``gpus.csv``, ``llms.csv`` and ``measurements/`` (default: the
            data shipped with the package, so commands work from any directory).
        tracking_uri: MLflow tracking URI (default: ``mlflow.db`` in ``home``).
        optuna_storage: default Optuna storage URL (default: ``optuna.db`` in ``home``).
        home: the folder of the default stores (``mlflow.db``, its ``mlruns/`` artifacts and
            ``optuna.db``), the same from any directory.
        recipe: the default recipe of ``tune`` and ``main`` (``RECIPES``).
        promotion_lease_s: how long a promotion may hold a model's promotion lock before
            another may take it over (``wattgpu.lifecycle.promotion_lock``).

    """

    data_dir: Path = SHIPPED_DATA_DIR
    tracking_uri: str = ""
    optuna_storage: str = ""
    home: Path = DEFAULT_HOME.expanduser()
    recipe: str = DEFAULT_RECIPE
    promotion_lease_s: float = 30.0

    def __post_init__(self) -> None:
        # The stores default to the home, so a Settings(home=...) alone is complete.
        if not self.tracking_uri:
            object.__setattr__(self, "tracking_uri", sqlite_uri(self.home / "mlflow.db"))
        if not self.optuna_storage:
            object.__setattr__(self, "optuna_storage", sqlite_uri(self.home / "optuna.db"))

    def make_home_for(self, url: str) -> None:
        """Create the home folder when ``url`` is one of its default stores (first use).

        A store the user named elsewhere is left alone: a folder missing there is their error.
        """
        if url in (sqlite_uri(self.home / "mlflow.db"), sqlite_uri(self.home / "optuna.db")):
            self.home.expanduser().mkdir(parents=True, exist_ok=True)

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


def sqlite_uri(path: Path) -> str:
    """The SQLAlchemy URL of an SQLite file (absolute, so it means the same from any directory)."""
    return f"sqlite:///{path.expanduser().resolve()}"


def load_settings(environ: dict[str, str] | None = None, data_dir: Path | None = None) -> Settings:
    """Build the settings from environment variables; the CLI calls it once, at command start.

    ``WATTGPU_DATA_DIR`` (default: the data shipped with the package), ``WATTGPU_HOME`` (default
    ``~/.wattgpu``), ``MLFLOW_TRACKING_URI`` (default ``mlflow.db`` in the home),
    ``WATTGPU_OPTUNA_STORAGE`` (default ``optuna.db`` in the home), ``WATTGPU_RECIPE`` (default
    ``full``) and ``WATTGPU_PROMOTION_LEASE_S`` (default 30; tests shorten it).

    Args:
        environ: the variables to read (default: ``os.environ``).
        data_dir: a data folder given explicitly (``wattgpu --data-dir``); wins over the variable.

    Raises:
        ConfigError: ``WATTGPU_RECIPE`` names no recipe.

    """
    env = os.environ if environ is None else environ
    recipe = env.get("WATTGPU_RECIPE") or DEFAULT_RECIPE
    if recipe not in RECIPES:
        raise ConfigError(f"WATTGPU_RECIPE must be one of {', '.join(RECIPES)}; got {recipe!r}")
    return Settings(
        data_dir=Path(data_dir or env.get("WATTGPU_DATA_DIR") or SHIPPED_DATA_DIR),
        home=Path(env.get("WATTGPU_HOME") or DEFAULT_HOME).expanduser(),
        tracking_uri=env.get("MLFLOW_TRACKING_URI") or "",
        optuna_storage=env.get("WATTGPU_OPTUNA_STORAGE") or "",
        recipe=recipe,
        promotion_lease_s=_seconds(env, "WATTGPU_PROMOTION_LEASE_S", 30.0),
    )


def _seconds(env: Mapping[str, str], name: str, default: float) -> float:
    """A positive number of seconds from variable ``name`` (``default`` when unset).

    Raises:
        ConfigError: the value is not a positive number.

    """
    value = env.get(name) or ""
    if not value:
        return default
    try:
        seconds = float(value)
    except ValueError:
        seconds = float("nan")
    if not seconds > 0 or seconds == float("inf"):
        raise ConfigError(f"{name} must be a positive number of seconds; got {value!r}")
    return seconds
