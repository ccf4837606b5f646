"""The top level the design card names, and a wheel that carries it.

``data/`` and ``expectations/`` are the single source of the shipped data and suites; pyproject
maps them into the package so a plain (non-editable) install still has them.
"""

from __future__ import annotations

import tomllib
from pathlib import Path

from wattgpu.config import EXAMPLE_QUERIES, EXPECTATIONS_DIR, SHIPPED_DATA_DIR

REPO = Path(__file__).resolve().parents[1]


def test_the_top_level_holds_the_data_and_the_suites():
    assert sorted(p.name for p in (REPO / "expectations").glob("*.json")) == [
        "clients.json",
        "engine_lines.json",
        "gpus.json",
        "length_distributions.json",
        "llms.json",
        "measurements.json",
    ]
    for name in (
        "gpus.csv",
        "llms.csv",
        "engine_lines.csv",
        "clients.csv",
        "length_distributions.csv",
        "README.md",
    ):
        assert (REPO / "data" / name).is_file(), name
    assert list((REPO / "data" / "measurements").glob("*.csv"))
    # no second copy inside the package
    assert not list((REPO / "src").rglob("*.csv")) and not list((REPO / "src").rglob("*.json"))


def test_a_checkout_reads_the_top_level_folders():
    assert SHIPPED_DATA_DIR == REPO / "data"
    assert EXPECTATIONS_DIR == REPO / "expectations"
    assert EXAMPLE_QUERIES == REPO / "examples" / "queries.csv" and EXAMPLE_QUERIES.is_file()


def test_the_wheel_carries_the_example_queries():
    data = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]
    assert data["package-data"]["wattgpu.shipped_examples"] == ["*.csv"]


def test_the_wheel_lists_every_package_and_maps_the_folders():
    setuptools = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]
    on_disk = {
        ".".join(p.parent.relative_to(REPO / "src").parts)
        for p in (REPO / "src").rglob("__init__.py")
    }
    mapped = {"wattgpu.shipped_data": "data", "wattgpu.shipped_expectations": "expectations"}
    mapped["wattgpu.shipped_examples"] = "examples"
    assert set(setuptools["packages"]) == on_disk | set(mapped)
    assert {k: v for k, v in setuptools["package-dir"].items() if k} == mapped


def test_the_suites_order_names_its_own_files():
    """The longest files that run first (``conftest.LONGEST_FIRST``) are files of this suite, and
    pytest runs them under ``--dist loadfile`` in that order: a renamed file would run last."""
    from conftest import LONGEST_FIRST

    tests = REPO / "tests"
    assert [name for name in LONGEST_FIRST if not (tests / name).is_file()] == []
    options = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["pytest"]
    addopts = options["ini_options"]["addopts"]
    assert "loadfile" in addopts and "--no-loadscope-reorder" in addopts
