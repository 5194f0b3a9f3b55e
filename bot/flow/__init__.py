"""The incident flow: opened → diagnosed and posted → approved → acted and verified →
extraction resumed → progress → resolved.

Each step is a small class that receives the few collaborators it uses, built once in
``bot/flow/assembly.py`` (called by ``bot/service.py`` and the demo). Every step reads
and writes Redis through ``storage/`` (the incident record, approvals, audit), so any
bot replica can take the next step, and a restart between two steps loses nothing.
"""
