"""cmx.engine.model."""
