"""vismerch."""
