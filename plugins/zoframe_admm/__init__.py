"""zoframe plugin package zoframe_admm."""
