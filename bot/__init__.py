"""incident-bot: alerts in, diagnosis over SSH, approvals in chat, verified remediation.

Kept import-free: the simulated host's tool shims import ``bot.sim`` on every command.
"""

__version__ = "0.1.0"
