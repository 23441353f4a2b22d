"""vismerch.merch."""
