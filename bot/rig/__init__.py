"""Local Redis, served processes, the Slack stand-in and signed sender: demo and tests only."""
