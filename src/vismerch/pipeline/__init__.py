"""vismerch.pipeline."""
