"""``incident-bot demo``: the seed story end to end on a simulated host, terminal chat."""
