"""Simulated GPU hosts: a real OpenSSH sshd whose sessions find fake GPU tools on PATH.

Kept import-free: every tool invocation on a sim host imports ``bot.sim.run``, and
start-up time is paid per command.
"""
