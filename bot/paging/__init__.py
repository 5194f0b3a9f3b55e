"""Paging: hand unacked incidents to PagerDuty (Events API v2) through a Redis outbox.

Sits between the flow and storage: it reads incidents and the events stream, writes the
outbox (``storage/paging.py``) and sends it; it never calls the flow or the chat.
"""
