"""cmx.workloads.catalog."""
