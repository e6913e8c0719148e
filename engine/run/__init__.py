"""cmx.engine.run."""
