import pandas as pd
import pytest

from wattgpu.errors import ConfigError
from wattgpu.modeling.learning.splits import LLM_BLOCKS, Folds, split_indices


def frame():
    rows = [(g, m, r) for g in "abcd" for m in ("x", "y", "z") for r in range(2)]
    return pd.DataFrame(rows, columns=["gpu", "model", "repeat"])


def test_logo_holds_out_exactly_one_gpu_per_fold():
    data = frame()
    folds = list(split_indices(data, "LOGO"))
    assert len(folds) == 4
    for train, test in folds:
        assert data.iloc[test]["gpu"].nunique() == 1
        assert data.iloc[test]["gpu"].iloc[0] not in set(data.iloc[train]["gpu"])


def test_lolo_holds_out_one_llm_per_fold():
    data = frame()
    folds = list(split_indices(data, "LOLO"))
    assert len(folds) == 3
    assert all(data.iloc[test]["model"].nunique() == 1 for _, test in folds)


def test_cv_never_splits_a_configuration_and_covers_every_row_once():
    data = frame()
    seen = []
    for train, test in split_indices(data, "CV", seed=1):
        train_pairs = set(zip(data.iloc[train]["gpu"], data.iloc[train]["model"], strict=True))
        test_pairs = set(zip(data.iloc[test]["gpu"], data.iloc[test]["model"], strict=True))
        assert not train_pairs & test_pairs
        seen.extend(test)
    assert sorted(seen) == list(range(len(data)))


def test_cv_is_seeded():
    a = [t.tolist() for _, t in split_indices(frame(), "CV", seed=3)]
    b = [t.tolist() for _, t in split_indices(frame(), "CV", seed=3)]
    assert a == b


def test_unknown_split_and_single_group_are_clear_errors():
    with pytest.raises(ConfigError, match="split must be one of CV, LOGO, LOLO"):
        list(split_indices(frame(), "LOSO"))
    with pytest.raises(ConfigError, match="LOGO needs at least 2"):
        list(split_indices(frame().assign(gpu="a"), "LOGO"))


def test_llm_blocks_hold_out_whole_architectures_in_the_recipes_blocks():
    # m0 and m1 are one architecture under two names (a fine-tune of a base, say): twins
    params = {"m0": 8.0, "m1": 8.0, "m2": 1.0, "m3": 3.0, "m4": 14.0, "m5": 70.0, "m6": 32.0}
    frame = pd.DataFrame(
        {"model": [f"m{i % 7}" for i in range(28)], "gpu": [f"g{i % 3}" for i in range(28)]}
    )
    frame["llm_params_b"] = frame["model"].map(params)
    frame["llm_num_layers"] = 32.0
    folds = list(split_indices(frame, LLM_BLOCKS, folds=Folds(cv=5, llm_blocks=3)))
    assert len(folds) == 3
    tested = []
    for train, test in folds:
        assert not set(frame["model"].iloc[train]) & set(frame["model"].iloc[test])
        held = set(frame["model"].iloc[test])
        assert ("m0" in held) == ("m1" in held)  # twins never straddle train and test
        tested += list(test)
    assert sorted(tested) == list(range(28))
    # six architectures: the default (the full recipe's) 10 blocks give one each
    assert len(list(split_indices(frame, LLM_BLOCKS))) == 6
