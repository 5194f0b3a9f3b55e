"""Settings, inventory and their validation."""
