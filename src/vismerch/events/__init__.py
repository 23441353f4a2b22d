"""Shopper events: the log, its queries and position-corrected performance."""
