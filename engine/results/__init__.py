"""cmx.engine.results."""
