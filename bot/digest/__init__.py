"""Digest assembly (pure numbers), rendering, chart and the runner."""
