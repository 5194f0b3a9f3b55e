"""The incident flow: opened → diagnosed and posted → approved → acted and verified →
extraction resumed → progress → resolved.

Every step reads and writes Redis (incident meta, approvals, audit), so any bot replica
can take the next step, and a restart between two steps loses nothing.
"""
