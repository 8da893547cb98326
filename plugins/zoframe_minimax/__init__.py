"""zoframe plugin package zoframe_minimax."""
