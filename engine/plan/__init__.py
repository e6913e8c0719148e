"""cmx.engine.plan."""
