"""The rules of cmx's findings as users read them (--help, tables' captions, the report): text only,
so the command line can show them without importing the statistics."""

#: How ``cmx trend`` finds, measures and gates a change (analysis/trend.py, analysis/changepoints.py).
TREND_RULE = (
    "Changes: the nights' medians segmented by backward elimination (as apache-otava tests each change point "
    "between its neighbours): the boundary whose Student t test between its two neighbouring segments (variance "
    "pooled over every segment) is weakest is removed until every one left has p ≤ 0.001, then each is measured "
    "between its neighbours: the runs since the change before it against the runs up to the next, under the rule "
    "of `cmx compare` (Mann-Whitney p ≤ 0.05 and the difference's 95 % interval excludes 0). The latest point is "
    "compared with the stable nights just before it (back to the first night whose runs show a change): a change "
    "that night only when shown beyond the margin and, from 3 such nights, standing out from their medians; a "
    "regression keeps gating while the latest point is still worse than the nights before it. Every change's p and "
    "each series' latest test are adjusted together within a group (Benjamini-Hochberg false discovery rate). A "
    "change is better or worse only when its whole 95 % interval lies beyond ±margin (5 %), else small (reported, "
    "never gating). Groups: headline (the workload's headline metrics, the experiment's objective and thresholds: "
    "only these gate), other, harness (cmx's own cost, clocks, fixed counts) and noise (the hosts' load from "
    "outside the run): shown, never gating"
)
