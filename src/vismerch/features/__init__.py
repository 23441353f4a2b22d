"""Feature backends: one protocol, a registry by name (see base.py)."""
