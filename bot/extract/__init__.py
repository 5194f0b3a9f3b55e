"""Resumable hidden-state extraction: one ``.pt`` file per sample, run as RQ jobs.

Exactly-once at the data level comes from atomic per-sample writes (temp file, fsync,
rename) plus a resume scan; the queue itself is at-least-once.
"""
