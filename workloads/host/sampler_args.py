"""The sampler's command line (workloads/host/sampler.py): its arguments read into a
:class:`SamplerConfig`, each checked as it is read (a role's ``ROLE=VALUE``, a port, a connection
kind, positive intervals)."""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from pathlib import Path

from cmx.workloads.host.connprobes import CONNECTION_KINDS
from cmx.workloads.host.watches import PidfileWatch


@dataclass(frozen=True)
class SamplerConfig:
    run_dir: Path
    host: str
    interval_s: float = 0.2
    pss_every: int = 5
    pss_budget_percent: float = 0.3
    watches: tuple[PidfileWatch, ...] = ()
    ports: tuple[tuple[str, int], ...] = ()
    connections: tuple[tuple[str, str], ...] = ()
    conn_interval_s: float = 0.25
    #: Keep a TTL on what the run has on servers that expire nothing themselves (the driver's host).
    keep_expiring: bool = False


def _role_value(kind: str, convert):
    def parse(text: str):
        role, sep, value = text.partition("=")
        if not sep or not role or not value:
            raise argparse.ArgumentTypeError(f"expected ROLE={kind}, got {text!r}")
        try:
            return role, convert(value)
        except ValueError as exc:
            raise argparse.ArgumentTypeError(f"{text!r}: {exc}") from None

    return parse


def _port(text: str) -> int:
    port = int(text)
    if not 0 < port < 65536:
        raise ValueError("port out of range")
    return port


def _kind(text: str) -> str:
    if text not in CONNECTION_KINDS:
        raise ValueError(f"kind must be one of {', '.join(CONNECTION_KINDS)}")
    return text


def _non_negative(convert):
    def parse(text: str):
        value = convert(text)
        if not value >= 0:
            raise argparse.ArgumentTypeError(f"must be >= 0, got {text}")
        return value

    return parse


def _positive(convert):
    def parse(text: str):
        value = convert(text)
        if not value > 0:
            raise argparse.ArgumentTypeError(f"must be > 0, got {text}")
        return value

    return parse


def parse_args(argv: list[str] | None, description: str = "") -> SamplerConfig:
    parser = argparse.ArgumentParser(prog="python -m cmx.workloads.host.sampler", description=description)
    parser.add_argument("--run-dir", required=True, type=Path)
    parser.add_argument("--host", required=True, help="the inventory name of this host")
    parser.add_argument("--interval", type=_positive(float), default=0.2, help="seconds between ticks")
    parser.add_argument("--pss-every", type=_positive(int), default=5, help="read PSS every N-th tick")
    parser.add_argument(
        "--pss-budget",
        type=_non_negative(float),
        default=0.3,
        metavar="PERCENT",
        help="space PSS rounds out so they cost at most this %% of a core (0: no limit)",
    )
    parser.add_argument(
        "--watch", action="append", default=[], metavar="ROLE=PIDFILE", type=_role_value("PIDFILE", Path)
    )
    parser.add_argument(
        "--watch-port", action="append", default=[], metavar="ROLE=PORT", type=_role_value("PORT", _port)
    )
    parser.add_argument(
        "--connections", action="append", default=[], metavar="ROLE=KIND", type=_role_value("KIND", _kind)
    )
    parser.add_argument("--conn-interval", type=_positive(float), default=0.25)
    parser.add_argument(
        "--keep-expiring",
        action="store_true",
        help="keep a TTL on the run's keys on its Redis broker while the run lives",
    )
    args = parser.parse_args(argv)
    return SamplerConfig(
        run_dir=args.run_dir,
        host=args.host,
        interval_s=args.interval,
        pss_every=args.pss_every,
        pss_budget_percent=args.pss_budget,
        watches=tuple(PidfileWatch(role, path) for role, path in args.watch),
        ports=tuple(args.watch_port),
        connections=tuple(args.connections),
        conn_interval_s=args.conn_interval,
        keep_expiring=args.keep_expiring,
    )
