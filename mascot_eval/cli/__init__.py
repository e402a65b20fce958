"""The ``mascot-eval`` command line. One module per command (group), loaded lazily."""
