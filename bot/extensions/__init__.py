"""Operator extensions: YAML probes, findings and actions from the directories the config
names under ``extensions:``, loaded and checked at start (``loader``), then registered
beside the built-in ones (``install``). The contract is ``docs/extending.md``; the pure
rules are ``bot/domain/extension.py``.
"""

from bot.extensions.install import install, load_and_install
from bot.extensions.loader import load

__all__ = ["install", "load", "load_and_install"]
