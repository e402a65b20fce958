"""Registers the built-in context loaders (imported lazily by ``LOADERS``)."""

from . import ed, esconv, qmsum, rated, userfiles  # noqa: F401  (each module registers its loader)
