"""cmx.engine.replay: production replay (issue 40). capture: record a fleet's task events into a
profile (Parquet, written by DuckDB); profile: summarise one."""
