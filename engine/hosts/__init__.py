"""cmx.engine.hosts."""
