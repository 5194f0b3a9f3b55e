"""Fake host tools; each module exposes ``main(argv, ctx) -> int`` and pure formatters."""
