"""vismerch.report."""
