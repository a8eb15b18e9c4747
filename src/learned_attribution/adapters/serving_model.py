"""The served explainer as code (MLflow's models-from-code): `serving.save_model` copies this file into
the model folder and `mlflow.pyfunc.load_model` runs it, so a registered model holds readable source and
safetensors + JSON, never a pickle that would run arbitrary code when loaded."""
from mlflow.models import set_model

from learned_attribution.adapters.serving import BundleExplainerModel

set_model(BundleExplainerModel())
