"""Imports the built-in backends so that they register themselves in BACKENDS."""
