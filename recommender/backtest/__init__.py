"""Backtest: replay a per-pool minute trace through a capacity model under several strategies."""
