"""The bot's side of the extraction jobs: submit, control, status, progress, metrics.

What the flow, the Home tab, ``/metrics``, ``incident-bot extract`` and the demo use.
Every Redis and RQ call is behind ``storage/jobs.py`` (``JobStore``); the run itself
(torch, files, repair) is ``bot/extract`` on the GPU host and is queued by name, so
nothing here loads torch (``tests/test_architecture.py`` checks it).
"""
