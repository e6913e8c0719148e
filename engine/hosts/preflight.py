"""Before the first run: every broker and backend the sweep uses must answer, or nothing runs."""

from __future__ import annotations

from urllib.parse import urlsplit, urlunsplit

from cmx.engine.errors import HostError
from cmx.workloads.vocab import kinds
from cmx.workloads.servers import registry as servers


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
    """Ping the broker at ``url`` through kombu, whatever its server (as the workers reach it)."""
    from kombu import Connection

    try:
        # A Sentinel set's URL carries its master's name, which kombu takes as a transport option.
        url_, options = servers.of_scheme(url.split("://", 1)[0]).celery_broker(url)
        with Connection(url_, connect_timeout=timeout, transport_options=options) as conn:
            conn.ensure_connection(max_retries=1, timeout=timeout)
    except Exception as exc:
        raise HostError(
            f"broker {redact(url)} does not answer: {type(exc).__name__}: {exc} "
            "(is it running? is broker_url in the inventory right?)".replace("\n", " ")
        ) from exc


def check_backend(kind: str, url: str, timeout: float = 5.0) -> None:
    """Ping the server of backend kind ``kind`` at ``url``; nothing for a kind without a server."""
    service = kinds.BACKENDS[kind].service
    if service is not None:
        check_server(service, url, kind, timeout)


def check_server(service: str, url: str, name: str | None = None, timeout: float = 5.0) -> None:
    """Ping the ``service`` backend (workloads/servers/) at ``url``; ``name``: the backend kind
    messages call it, the service's own name unless said."""
    try:
        servers.get(service).ping(url, timeout)
    except Exception as exc:
        raise HostError(
            f"{name or service} backend {redact(url)} does not answer: {type(exc).__name__}: "
            f"{str(exc).strip().splitlines()[0] if str(exc).strip() else ''} "
            "(is it running? is backend_url in the inventory right?)"
        ) from exc
