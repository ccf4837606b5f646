"""The served model's code, as MLflow's *models from code* logs it (``python_model=`` this file).

MLflow runs this file when it logs or loads the model; nothing imports it. Logged so, a model
version holds this source instead of a CloudPickle of ``WattgpuModel``: loading it imports the
``wattgpu`` package that travels with the model (``code_paths``) and builds the model from its
artifacts, so it never depends on unpickling a class of the release that trained it.
"""

import mlflow

from wattgpu.lifecycle.pyfunc import WattgpuModel

mlflow.models.set_model(WattgpuModel())
