"""The served model's environment names every package that loading and asking it imports.

A model server built from the model alone (``mlflow models serve --env-manager virtualenv``,
``mlflow models build-docker``) installs the model's requirements and nothing else: a package
the pyfunc imports that is neither listed nor installed with one that is, fails there.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from importlib.metadata import PackageNotFoundError, packages_distributions, requires
from pathlib import Path

import cloudpickle
import mlflow
import pandas as pd
import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from wattgpu.lifecycle.pyfunc import SERVED_PACKAGES

pytestmark = pytest.mark.slow

# Load a model in a fresh interpreter, ask it once, print the top-level modules that got imported.
LOAD_AND_ASK = """
import json, sys
import mlflow.pyfunc, pandas as pd
before = set(sys.modules)
model = mlflow.pyfunc.load_model(sys.argv[1])
model.predict(pd.DataFrame([{"gpu": "NVIDIA L4", "model": "meta-llama/Llama-3.1-8B-Instruct",
                             "scenario": "offline"}]))
print(json.dumps(sorted({m.split(".")[0] for m in set(sys.modules) - before})))
"""


class Trivial(mlflow.pyfunc.PythonModel):
    """What MLflow itself imports to load and ask any pyfunc (its optional extras included)."""

    def predict(self, context, model_input: pd.DataFrame, params=None) -> pd.DataFrame:  # noqa: ANN001
        return pd.DataFrame({"prediction": [0.0] * len(model_input)})


def imported_distributions(model_uri: str, env: dict) -> set[str]:
    """The distributions whose modules loading and asking ``model_uri`` imports."""
    done = subprocess.run(
        [sys.executable, "-c", LOAD_AND_ASK, model_uri],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    modules = json.loads(done.stdout.strip().splitlines()[-1])
    owners = packages_distributions()
    return {
        canonicalize_name(dist)
        for module in modules
        if module not in sys.stdlib_module_names
        for dist in owners.get(module, [])
    }


def installed_with(names: tuple[str, ...]) -> set[str]:
    """The distributions ``names`` bring with them (their required dependencies, transitively)."""
    seen: set[str] = set()
    todo = [canonicalize_name(n) for n in names]
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        try:
            needs = requires(name) or []
        except PackageNotFoundError:
            continue
        for text in needs:
            need = Requirement(text)
            if need.marker is None or need.marker.evaluate({"extra": ""}):
                todo.append(canonicalize_name(need.name))
    return seen


def test_every_imported_package_is_a_requirement_or_comes_with_one(store, tmp_path):
    # both from a local folder, as a server loads them (a registry URI would add the store's
    # own imports: SQLAlchemy, alembic, mako and its optional pygments)
    mlflow.set_tracking_uri(store["settings"].tracking_uri)
    local = mlflow.artifacts.download_artifacts("models:/wattgpu-power@production")
    ours = imported_distributions(local, dict(os.environ))
    # by value: the interpreter that loads it cannot import this test module
    cloudpickle.register_pickle_by_value(sys.modules[__name__])
    mlflow.pyfunc.save_model(str(tmp_path / "trivial"), python_model=Trivial())
    mlflows_own = imported_distributions(str(tmp_path / "trivial"), dict(os.environ))
    imported = ours - mlflows_own - {"wattgpu"}  # wattgpu travels with the model as code
    assert {"catboost"} <= imported  # the check sees real imports
    missing = imported - installed_with(SERVED_PACKAGES)
    assert not missing, f"imported but not in the served requirements: {sorted(missing)}"


def test_the_registered_model_pins_each_served_package(store):
    mlflow.set_tracking_uri(store["settings"].tracking_uri)
    path = mlflow.pyfunc.get_model_dependencies("models:/wattgpu-itl@production")
    pinned = {
        canonicalize_name(Requirement(line).name): str(Requirement(line).specifier)
        for line in Path(path).read_text(encoding="utf-8").splitlines()
        if line.strip() and not line.startswith("#")
    }
    for name in SERVED_PACKAGES:
        assert pinned.get(canonicalize_name(name), "").startswith("=="), (name, pinned)
