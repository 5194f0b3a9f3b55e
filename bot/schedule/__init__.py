"""The leader-leased scheduler and its timers: digest, escalation, sampling."""
