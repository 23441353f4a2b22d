"""Catalog sources, the store and the synthetic sample catalog."""
