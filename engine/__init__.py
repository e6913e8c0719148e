"""cmx.engine."""
