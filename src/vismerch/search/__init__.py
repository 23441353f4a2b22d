"""vismerch.search."""
