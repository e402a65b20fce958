"""Statistics: bootstrap intervals, paired tests, multiple-comparison corrections."""
