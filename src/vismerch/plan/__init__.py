"""vismerch.plan."""
