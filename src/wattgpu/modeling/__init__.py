"""The models, pure and free of I/O, in three layers that import only downwards.

- ``physical``: the analytical serving model, the physics features of an (LLM, GPU, workload)
  triple, the targets relative to the analytical prior, the simulator and the prior's fit;
- ``learning``: recipes, splits, baselines, the CatBoost members, the evaluation and the
  prediction intervals;
- ``answering``: what a query may hold, the training domain and its warnings, the model card,
  and the one path from a query to an answer.

``metrics`` (MdAPE, r, ranking τ) is shared by all three.
"""
