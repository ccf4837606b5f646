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

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from wattgpu.lifecycle.pyfunc import SERVED_PACKAGES

pytestmark = pytest.mark.slow

# Load the registered model in a fresh interpreter, ask it once, print what got imported.
LOAD_AND_ASK = """
import json, sys
import mlflow.pyfunc, pandas as pd
before = set(sys.modules)
model = mlflow.pyfunc.load_model("models:/wattgpu-power@production")
model.predict(pd.DataFrame([{"gpu": "NVIDIA L4", "model": "meta-llama/Llama-3.1-8B-Instruct",
                             "scenario": "offline"}]))
print(json.dumps(sorted({m.split(".")[0] for m in set(sys.modules) - before})))
"""


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


def test_every_imported_package_is_a_requirement_or_comes_with_one(store):
    env = {**os.environ, "MLFLOW_TRACKING_URI": store["settings"].tracking_uri}
    done = subprocess.run(
        [sys.executable, "-c", LOAD_AND_ASK], env=env, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr[-2000:]
    modules = json.loads(done.stdout.strip().splitlines()[-1])
    owners = packages_distributions()
    imported = {
        canonicalize_name(dist)
        for module in modules
        if module not in sys.stdlib_module_names
        for dist in owners.get(module, [])
    } - {"wattgpu"}  # travels with the model as code
    assert {"catboost", "scikit-learn", "scipy"} <= imported  # the check sees real imports
    missing = imported - installed_with(SERVED_PACKAGES)
    assert not missing, f"imported but not in the served requirements: {sorted(missing)}"
