"""vismerch.accel."""
