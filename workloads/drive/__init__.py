"""cmx.workloads.drive."""
