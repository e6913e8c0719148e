"""cmx.cli."""
