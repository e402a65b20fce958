"""Run directories, statistics, summaries, leaderboards, reports and regression checks."""
