"""Imports the built-in metric modules so that they register themselves in METRICS."""

from . import echo, length, lexical, persona, redundancy, repetition  # noqa: F401
