"""The analysis of benchmarks/capture_toggle.py: each window's figures from the producer's marks, and the
paired comparison of listen and off windows (scipy.stats.bootstrap, BCa)."""

from __future__ import annotations

import math
import statistics

TARGET = 0.02


def per_window(result: dict) -> list[dict]:
    """Each window's producer rate and CPU a task, read off the producer's marks."""
    import numpy as np

    marks = np.asarray(result["marks"])
    at, cpu, n, busy = marks[:, 0], marks[:, 1], marks[:, 2], marks[:, 3]
    rows = []
    for w in result["windows"]:
        tasks = np.interp(w["t1"], at, n) - np.interp(w["t0"], at, n)
        secs = w["t1"] - w["t0"]
        own = np.interp(w["t1"], at, cpu) - np.interp(w["t0"], at, cpu)
        rows.append(w | {"rate": tasks / secs, "cpu_task": own / tasks, "worker_share": w["worker"] / secs})
        inside = np.interp(w["t1"], at, busy) - np.interp(w["t0"], at, busy)
        rows[-1] |= {"broker_share": w["broker"] / secs, "capacity": tasks / inside}
        rows[-1] |= {"idle_share": w["idle"] / secs, "events_s": w["events"] / secs}
    return rows


def mean_interval(values, statistic: str = "mean") -> tuple[float, float, float]:
    """The mean (BCa) or the median (percentile) and its 95 % bootstrap interval (scipy.stats.bootstrap)."""
    import numpy as np
    from scipy.stats import bootstrap

    values, fn = np.asarray(values), getattr(np, statistic)
    method = "BCa" if statistic == "mean" else "percentile"
    ci = bootstrap((values,), fn, confidence_level=0.95, method=method, rng=1)
    return float(fn(values)), float(ci.confidence_interval.low), float(ci.confidence_interval.high)


def report(name: str, args, rows: list[dict]) -> None:
    by = {(r["pair"], r["state"]): r for r in rows}
    pairs = sorted({r["pair"] for r in rows})
    listen = [by[p, "listen"] for p in pairs]
    off = [by[p, "off"] for p in pairs]
    sent = "with the producer's task-sent events" if args.sent_events else "no task-sent events"
    offered = f"{args.rate:,.0f} tasks/s offered" if args.rate else "flat out"
    print(
        f"-- {name}: {len(pairs)} pairs of {args.window:g} s windows (off / listen in random order), one producer "
        f"publishing throughout ({offered}; {sent}); a worker -E (threads, 4) consuming"
    )
    for label, group in (("off", off), ("listen", listen)):
        rates = [r["rate"] for r in group]
        print(
            f"   {label:<7} rate median {statistics.median(rates):>7,.0f}/s "
            f"(min-max {min(rates):,.0f}-{max(rates):,.0f}); "
            f"capacity {statistics.median(r['capacity'] for r in group):,.0f}/s; "
            f"producer CPU {statistics.median(r['cpu_task'] for r in group) * 1e6:.0f} us a task; "
            f"worker CPU share {statistics.median(r['worker_share'] for r in group):.2f}; "
            f"broker {statistics.median(r['broker_share'] for r in group):.2f}; "
            f"CPU R idle {statistics.median(r['idle_share'] for r in group):.2f}"
        )
    print(
        "   events/s the capture received in listen windows: median "
        f"{statistics.median(r['events_s'] for r in listen):,.0f}"
    )
    logs = [math.log(a["capacity"] / b["capacity"]) for a, b in zip(listen, off)]
    mid, low, high = (math.exp(v) for v in mean_interval(logs))
    print(
        "   capacity (tasks a second of the producer's time in apply_async: its throughput flat out) listen/off, "
        f"paired: {mid:.4f} [{low:.4f}-{high:.4f}] (geometric mean, 95 % BCa bootstrap; pairs "
        f"{min(logs):+.3f} to {max(logs):+.3f} in log, sd {statistics.stdev(logs):.3f})"
    )
    med = [math.exp(v) for v in mean_interval(logs, statistic="median")]
    print(f"   the same, median pair (outliers aside): {med[0]:.4f} [{med[1]:.4f}-{med[2]:.4f}] (percentile bootstrap)")
    cpu = [math.log(a["cpu_task"] / b["cpu_task"]) for a, b in zip(listen, off)]
    cmid, clow, chigh = (math.exp(v) for v in mean_interval(cpu))
    print(f"   producer CPU a task listen/off, paired: {cmid:.4f} [{clow:.4f}-{chigh:.4f}]")
    for who in ("worker", "broker"):
        diff = mean_interval([a[f"{who}_share"] - b[f"{who}_share"] for a, b in zip(listen, off)])
        print(f"   {who} CPU share listen - off, paired: {diff[0]:+.3f} [{diff[1]:+.3f} to {diff[2]:+.3f}]")
    # /proc counts CPU in clock ticks (10 ms): per pair too coarse, over all pairs not
    per_event = statistics.mean(a["events_s"] for a in listen)
    extra = [
        (d / per_event) * 1e6
        for d in mean_interval([a["broker_share"] - b["broker_share"] for a, b in zip(listen, off)])
    ]
    print(
        f"   the broker's CPU for the capture: {extra[0]:+.1f} us an event captured "
        f"[{extra[1]:+.1f} to {extra[2]:+.1f}]"
    )
    # time inside apply_async = the producer's CPU + its waiting (for the broker, for a core)
    waits = [
        (1 / a["capacity"] - a["cpu_task"] - 1 / b["capacity"] + b["cpu_task"]) * b["capacity"]
        for a, b in zip(listen, off)
    ]
    amid, alow, ahigh = mean_interval(waits)
    print(
        f"   producer's waiting a task, listen - off, as a share of a task's time: {amid:+.2%} "
        f"[{alow:+.2%} to {ahigh:+.2%}]"
    )
    per_task = statistics.median(a["events_s"] / a["rate"] for a in listen)
    fleet = 4 if args.sent_events else 3
    worst = 1 - low
    print(
        f"   capture's cost to the producer's throughput: {1 - mid:+.2%}, at most {worst:+.2%} (95 %): "
        f"{'within' if worst <= TARGET else 'NOT shown within'} {TARGET:.0%}, at {per_task:.2f} events captured a "
        f"task published"
    )
    scale = max(1.0, fleet / per_task)
    print(
        f"   scaled to a fleet whose workers keep up ({fleet} events a task: x{scale:.1f}, the broker's work for a "
        f"capture being per event): {(1 - mid) * scale:+.2%}, at most {worst * scale:+.2%}: "
        f"{'within' if worst * scale <= TARGET else 'NOT shown within'} {TARGET:.0%}"
    )
