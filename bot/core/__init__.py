"""Errors, strings, metrics and process helpers: the bottom layer, imported by all."""
