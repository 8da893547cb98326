"""zoframe plugin package zoframe_constrained."""
