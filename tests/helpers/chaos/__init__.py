"""The chaos run (issue 39): incidents through ``serve`` while a seeded scheduler breaks the
ground under it, then a checker that reads the history and names every broken invariant.

``world`` starts the real processes, ``faults`` breaks and heals them, ``driver`` plays
Alertmanager and the people in Slack, ``checker`` reads the history, ``run`` puts them
together: ``run_chaos(ChaosPlan(...))`` → ``ChaosReport``. The short form runs in the
default suite (``tests/chaos/``), the long form is ``python -m bench.chaos``.
"""
