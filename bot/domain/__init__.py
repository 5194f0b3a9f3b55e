"""Pure, no I/O: incident lifecycle and model, grouping planner, approval policy, findings."""
