"""Recipes, splits, baselines, the CatBoost members, the evaluation and the intervals."""
