"""Workloads: model definitions (YAML files and Hugging Face config.json), per-phase op plans, the
vectorized model analysis and the prediction report."""

from .models import Model, ModelError, builtin_models, get_model, parse_model
from .phases import PHASES, plan

__all__ = ["Model", "ModelError", "builtin_models", "get_model", "parse_model", "PHASES", "plan"]
