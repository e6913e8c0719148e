"""Analysis of the results database: SQL views, comparisons, charts and the HTML report."""
