"""cmx.workloads.host."""
