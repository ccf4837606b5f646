"""The vectorised feature and prediction path answers what the old pandas path answered.

``fixtures/frozen_*`` were written by ``fixtures/make_frozen_answers.py`` on the code before the
feature path was rewritten on numpy arrays (issue 10): 3,000 varied queries, two small models,
and what the old code computed for them. Every number must come back the same to 12
significant digits: bit for bit holds on one CPU, but the BLAS kernels of another CPU may round
the last bit (1 ULP) differently.
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from catboost import CatBoostRegressor

from wattgpu.config import SHIPPED_DATA_DIR
from wattgpu.data.catalog import Catalog
from wattgpu.data.kernels import KERNELS_FILE
from wattgpu.modeling.answering.card import ModelCard
from wattgpu.modeling.answering.inference import predict_queries
from wattgpu.modeling.answering.queries import check_queries
from wattgpu.modeling.learning.models import Regressor
from wattgpu.modeling.learning.novelty import Familiarity
from wattgpu.modeling.learning.uncertainty import Calibration, IntervalModel
from wattgpu.modeling.learning.unseen import UNSEEN_GPU
from wattgpu.modeling.physical.features import ANALOG_FEATURES, FEATURE_COLUMNS, build_features
from wattgpu.modeling.physical.synthetic import synthesize

FIXTURES = Path(__file__).parent / "fixtures"
# the GPUs of the catalogue the frozen measurement rows were drawn on
CURATED_GPUS = 35
EXTRA_COLUMNS = ("prior_power_w", "prior_itl_s", "prior_power_cpu_w", "free_memory_gb")


@pytest.fixture(scope="module")
def queries() -> pd.DataFrame:
    return pd.read_csv(FIXTURES / "frozen_queries.csv.gz")


@pytest.fixture(scope="module")
def frozen_features() -> pd.DataFrame:
    return pd.read_csv(FIXTURES / "frozen_features.csv.gz")


def load_model(target: str) -> tuple[Regressor, ModelCard]:
    card = ModelCard.from_json((FIXTURES / "frozen_model" / f"{target}.json").read_text())
    members = []
    for number, without in enumerate(card.members):
        member = CatBoostRegressor()
        member.load_model(str(FIXTURES / "frozen_model" / f"{target}_{number}.cbm"))
        members.append((tuple(without), member))
    return Regressor(target, members, Familiarity.from_dict(card.familiarity)), card


def unchanged(features: pd.DataFrame) -> np.ndarray:
    """Rows the old code already read right: dense LLMs in 16- or 32-bit weights.

    Issue 18 changed, on purpose, the weights of mixture-of-experts LLMs (a step reads the
    experts its tokens hit) and of formats below 16 bits (embeddings and head stay 16-bit,
    scales counted): those rows are compared in tests/test_physics_moe.py instead. The
    AIConfigurator import read the sliding-window layers from the configs: gemma-2/3
    rows now count only their full-attention layers in ``num_kv_layers``, on purpose.
    """
    dense = ~(features["llm_active_params_b"] < features["llm_params_b"])
    dense &= features["llm_num_experts"].isna()
    if "llm_num_sliding_layers" in features:
        dense &= features["llm_num_sliding_layers"].isna()
    return (dense & (features["bytes_per_param"] >= 2.0)).to_numpy()


def assert_same(new: pd.DataFrame, old: pd.DataFrame) -> None:
    keep = unchanged(new)
    assert keep.sum() > 0.6 * len(new)
    new, old = new[keep], old[keep]
    # the analog inputs come from a model's training rows (``analogs``), not from the features
    built = [c for c in FEATURE_COLUMNS if c not in ANALOG_FEATURES]
    for column in (*built, *EXTRA_COLUMNS):
        if not pd.api.types.is_numeric_dtype(old[column]):
            assert new[column].astype(str).tolist() == old[column].astype(str).tolist(), column
        else:
            np.testing.assert_allclose(
                new[column].to_numpy(float), old[column].to_numpy(float), rtol=1e-12, err_msg=column
            )


def test_query_features_are_unchanged(queries, frozen_features, catalog):
    old = frozen_features[frozen_features["kind"] == "query"].reset_index(drop=True)
    assert len(old) == len(queries) == 3000
    assert_same(build_features(check_queries(queries, catalog), catalog), old)


def curated_catalog(folder: Path) -> Catalog:
    """The shipped catalogue cut to the 35 GPUs curated before issue 59 (its first rows).

    ``simulate`` draws for every catalogue GPU in turn: the frozen rows were drawn on these 35.
    """
    for name in ("llms.csv", KERNELS_FILE):
        shutil.copy(SHIPPED_DATA_DIR / name, folder / name)
    gpus = pd.read_csv(SHIPPED_DATA_DIR / "gpus.csv", keep_default_na=False, dtype=str)
    gpus.head(CURATED_GPUS).to_csv(folder / "gpus.csv", index=False)
    return Catalog.load(folder / "gpus.csv", folder / "llms.csv")


def test_measurement_features_are_unchanged(frozen_features, tmp_path):
    old = frozen_features[frozen_features["kind"] == "measurement"].reset_index(drop=True)
    catalog = curated_catalog(tmp_path)
    assert catalog.gpus.index[-1] == "NVIDIA GB300"  # the last of the 35
    rows = synthesize(catalog, seed=5).iloc[::7].head(2000).reset_index(drop=True)
    assert_same(build_features(rows, catalog), old)


@pytest.mark.parametrize("target", ["power", "itl"])
def test_answers_are_unchanged_where_the_configuration_runs(queries, catalog, target):
    old = pd.read_csv(FIXTURES / "frozen_answers.csv.gz", keep_default_na=False)
    old = old[old["target"] == target].reset_index(drop=True)
    features = build_features(check_queries(queries, catalog), catalog)
    keep = unchanged(features)
    limit = features.loc[keep, "gpu_tdp_w"].to_numpy(float)
    old = old[keep].reset_index(drop=True)
    queries = queries[keep].reset_index(drop=True)
    model, card = load_model(target)
    # the frozen answers predate per-row intervals (a constant ratio per scenario then): compare
    # the predictions, and check the interval against a constant difficulty of 1 by hand
    bounds = IntervalModel(target, (), 1.0, {UNSEEN_GPU: Calibration(-0.5, 0.25)})
    # the frozen answers predate the tails: not simulated here (tests/test_tails.py has them)
    new = predict_queries(card, model, bounds, catalog, queries, with_tails=False)
    assert new["gpu"].tolist() == old["gpu"].tolist()
    runs = new["prediction"].notna().to_numpy()
    assert 1500 < runs.sum() < len(new)
    np.testing.assert_allclose(
        new.loc[runs, "prediction"].to_numpy(float),
        old.loc[runs, "prediction"].astype(float).to_numpy(),
        rtol=1e-12,
    )
    prediction = new.loc[runs, "prediction"].to_numpy(float)
    np.testing.assert_allclose(new.loc[runs, "lower"], prediction * np.exp(-0.5), rtol=1e-12)
    upper = prediction * np.exp(0.25)
    if target == "power":  # a GPU's mean power ends at its power limit
        upper = np.minimum(upper, limit[runs])
    np.testing.assert_allclose(new.loc[runs, "upper"], upper, rtol=1e-12)
    assert new.loc[runs, "warnings"].tolist() == old.loc[runs, "warnings"].tolist()
    # what the old code answered with a number and a warning now has no number, and says why
    for before, now in zip(old.loc[~runs, "warnings"], new.loc[~runs, "warnings"], strict=True):
        # (the old text rounded a fraction of one sequence to 0 or 1)
        assert re.match(r"does not fit|KV cache holds only [01] sequences", before), before
        assert now.startswith("does not fit"), now
    assert new.loc[~runs, ["lower", "upper"]].isna().all().all()


def test_the_served_input_answers_what_the_training_frame_answers(catalog):
    # a query's Pool is float32 and object arrays matched by name (catboost.FeaturesData); a
    # fit's is a frame in FEATURE_COLUMNS order: every member must read both the same way
    from wattgpu.modeling.learning import models
    from wattgpu.modeling.learning.recipe import recipe_of
    from wattgpu.modeling.physical.targets import rows_with_target

    rows = rows_with_target("itl", build_features(synthesize(catalog, seed=4).iloc[::9], catalog))
    model = models.fit(recipe_of("itl", "fast"), rows, {"iterations": 30})
    served, framed = models.Pools("itl", rows), models.Pools("itl", rows, np.zeros(len(rows)))
    assert len(model.members) == 2
    for without, member in model.members:
        from_arrays = member.predict(served(without))
        assert len(np.unique(from_arrays)) > 10  # a model that answers more than a constant
        np.testing.assert_array_equal(from_arrays, member.predict(framed(without)))
