"""Before the first run: every broker and backend the sweep uses must answer, or nothing runs."""
from __future__ import annotations

from urllib.parse import urlsplit, urlunsplit

from cmx.engine.errors import HostError
from cmx.workloads.kinds import libpq_url


def redact(url: str) -> str:
    """The URL without its password (for messages, logs and the results database); each of a
    Sentinel set's ``;``-joined URLs too."""
    if ";" in url:
        return ";".join(map(redact, url.split(";")))
    parts = urlsplit(url)
    if parts.password is None:
        return url
    netloc = parts.netloc.rsplit("@", 1)
    user = (parts.username or "") + ":***"
    return urlunsplit(parts._replace(netloc=f"{user}@{netloc[-1]}"))


def check_broker(url: str, timeout: float = 5.0) -> None:
    from kombu import Connection

    from cmx.workloads import sentinel

    try:
        # A Sentinel set's URL carries its master's name, which kombu takes as a transport option.
        url_, options = sentinel.celery_broker(url) if sentinel.is_sentinel(url) else (url, {})
        with Connection(url_, connect_timeout=timeout, transport_options=options) as conn:
            conn.ensure_connection(max_retries=1, timeout=timeout)
    except Exception as exc:
        raise HostError(f"broker {redact(url)} does not answer: {type(exc).__name__}: {exc} "
                        "(is it running? is broker_url in the inventory right?)".replace("\n", " ")) from exc


def check_backend(kind: str, url: str, timeout: float = 5.0) -> None:
    try:
        if kind == "redis":
            import redis

            redis.Redis.from_url(url, socket_connect_timeout=timeout).ping()
        elif kind == "postgres":
            import psycopg2

            psycopg2.connect(libpq_url(url), connect_timeout=int(timeout)).close()
    except Exception as exc:
        raise HostError(f"{kind} backend {redact(url)} does not answer: {type(exc).__name__}: "
                        f"{str(exc).strip().splitlines()[0] if str(exc).strip() else ''} "
                        "(is it running? is backend_url in the inventory right?)") from exc
