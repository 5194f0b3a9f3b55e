"""The host agent: runs on each GPU host and posts alerts to the bot's ``/alerts``.

It must stay light next to the real work: standard library only (plus ``pynvml``,
imported lazily), never torch, pydantic or the rest of the bot. ``python -m bot.agent``
is the lean entry point; ``incident-bot agent`` forwards to the same parser.
"""
