"""Leave one source out: a held-out family's rows reach neither its model nor its prior.

On the shipped real measurements: the held-out family's measurements are perturbed, and the
fold that holds it out fits the same physics constants, the same engine floors and the same
predictions for it, while the folds that train on it see the change.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from wattgpu.config import SHIPPED_DATA_DIR
from wattgpu.data.measurements import expand_paths, read_measurements, resolve_names
from wattgpu.modeling.learning.evaluation import PRIOR_METHOD, evaluate, out_of_fold
from wattgpu.modeling.learning.recipe import recipe_of
from wattgpu.modeling.learning.splits import source_family, split_indices
from wattgpu.modeling.physical.features import build_features
from wattgpu.modeling.physical.prior import fit_constants, fit_engine_floors, refit_prior
from wattgpu.modeling.physical.prior_columns import with_prior
from wattgpu.modeling.physical.targets import rows_with_target

pytestmark = pytest.mark.slow

HELD = "argonne"


@pytest.fixture(scope="module")
def itl_rows(catalog) -> pd.DataFrame:
    raw = read_measurements(expand_paths([SHIPPED_DATA_DIR / "measurements"]))
    resolved, _ = resolve_names(raw, catalog)
    return rows_with_target("itl", build_features(resolved, catalog))


def _perturbed(rows: pd.DataFrame) -> pd.DataFrame:
    """``rows`` with the held-out family's ITL and power 1.7 times what they measured."""
    held = source_family(rows) == HELD
    out = rows.copy()
    for column in ("itl_s", "itl_median_s", "mean_power_w"):
        out.loc[held, column] = out.loc[held, column] * 1.7
    return out


def _fitted(train: pd.DataFrame) -> tuple[object, dict[str, float]]:
    constants = fit_constants(train)
    return constants, fit_engine_floors(with_prior(train, constants, floors={}))


def test_a_loso_fold_fits_its_prior_without_the_held_out_source(itl_rows):
    perturbed = _perturbed(itl_rows)
    families = source_family(itl_rows)
    seen_change = False
    for train, test in split_indices(itl_rows, "LOSO"):
        held = set(families[test])
        assert not held & set(families[train])
        before = _fitted(itl_rows.iloc[train])
        after = _fitted(perturbed.iloc[train])
        if held == {HELD}:
            assert before == after
        else:
            seen_change |= before != after
    # the perturbation is one a fit sees when the family is on the training side
    assert seen_change


def test_a_loso_fold_predicts_the_held_out_source_the_same_whatever_it_measured(itl_rows):
    recipe = recipe_of("itl", "fast")
    held = source_family(itl_rows) == HELD
    before = out_of_fold(recipe, itl_rows, "LOSO", prepare=refit_prior)
    after = out_of_fold(recipe, _perturbed(itl_rows), "LOSO", prepare=refit_prior)
    for column in ("pred", "prior"):
        assert np.array_equal(before[column][held], after[column][held])
        assert not np.array_equal(before[column][~held], after[column][~held])
    assert set(before["source_family"]) == set(source_family(itl_rows))


def test_the_evaluation_table_has_loso_beside_the_prior_and_nearest(itl_rows):
    table, oof = evaluate(recipe_of("itl", "fast"), itl_rows, splits=("LOSO",), prepare=refit_prior)
    assert set(table["split"]) == {"LOSO"} and set(oof) == {"LOSO"}
    methods = set(table["method"])
    assert {"catboost", PRIOR_METHOD, "roofline", "nearest-measured"} <= methods
    # one source measures TTFT today: no LOSO for it, and no error
    ttft = itl_rows[source_family(itl_rows) == "llm-pilot"].assign(ttft_s=0.1)
    table, oof = evaluate(recipe_of("ttft", "fast"), ttft, splits=("LOSO",))
    assert table.empty and oof == {}
