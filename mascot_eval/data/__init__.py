"""Evaluation contexts and the loaders that build them from public datasets' raw release files."""
