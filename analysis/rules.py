"""The rules of cmx's findings as users read them (--help, tables' captions, the report): text only,
so the command line can show them without importing the statistics."""

#: How ``cmx trend`` finds, measures and gates a change (analysis/trend.py, analysis/changepoints.py).
TREND_RULE = (
    "Changes: E-divisive means over the points' medians (as apache-otava does), each split kept when scipy's "
    "permutation test of the points' order finds it (p ≤ 0.05; inside a segment whose best split is not kept, "
    "its halves are searched at p ≤ 0.025, so a dip that recovered is still found), then measured between its "
    "neighbours: the runs since the change before it against the runs up to the next, under the rule of "
    "`cmx compare` (Mann-Whitney p ≤ 0.05 and the difference's 95 % interval excludes 0). The latest point is "
    "compared with the runs since the last change: a change that night only when shown beyond the margin and, "
    "from 3 points before it, standing out from their medians. Every change's p and each series' latest test "
    "are adjusted together within a group (Benjamini-Hochberg false discovery rate). A change is better or worse "
    "only when its whole 95 % interval lies beyond ±margin (5 %), else small (reported, never gating). Groups: "
    "headline (the workload's headline metrics, the experiment's objective and thresholds: only these gate), "
    "other, harness (cmx's own cost, clocks, fixed counts) and noise (the hosts' load from outside the run): "
    "shown, never gating"
)
