"""vismerch.serve."""
