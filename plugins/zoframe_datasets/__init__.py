"""zoframe plugin package zoframe_datasets."""
