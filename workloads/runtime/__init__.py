"""The runtime every cmx process shares: the run's spec, stamps, records, files."""
