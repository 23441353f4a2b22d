"""CLI command modules, each with a register(app) function."""
