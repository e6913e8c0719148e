"""cmx.engine.cli."""
