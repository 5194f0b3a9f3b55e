"""Resumable hidden-state extraction, the worker side: one ``.pt`` file per sample.

Exactly-once at the data level comes from atomic per-sample writes (temp file, fsync,
rename) plus a resume scan; the queue itself is at-least-once. No Redis, RQ or storage
here: a run reports through the ``RunRecord`` it is handed (``record.py``); the bot's
side of the jobs (submit, status, progress) is ``bot/jobs``.
"""
