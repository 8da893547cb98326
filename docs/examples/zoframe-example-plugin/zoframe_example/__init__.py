"""An example zoframe plugin package (see docs/writing-a-plugin.md)."""
