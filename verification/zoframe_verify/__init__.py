"""zoframe plugin package zoframe_verify."""
