"""vismerch.imaging."""
