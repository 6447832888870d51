"""Recommender: signals, policies that propose changes, proposals, and the backtest."""
