"""PostgreSQL: a result backend (Celery's database backend over SQLAlchemy and psycopg2), and the
cluster a sweep provisions with roles/postgres."""

from __future__ import annotations

import glob
import os
import time
from types import MappingProxyType
from typing import Any, Mapping

from cmx.workloads.vocab.clients import BACKEND
from cmx.workloads.vocab.services import POSTGRES

from .base import LocalService, Place, RestartError, RunNames, Server, run
from .probes import PROBE_TIMEOUT_S, ConnectionProbe, ProbeError, url_from_env


def libpq_url(url: str) -> str:
    """A PostgreSQL URL as libpq (psycopg2) takes it: Celery spells it db+postgresql[+driver]://."""
    scheme, sep, rest = url.removeprefix("db+").partition("://")
    return scheme.split("+")[0] + sep + rest


class PostgresProbe(ConnectionProbe):
    def __init__(self, role: str, kind: str, run_id: str | None) -> None:
        super().__init__(role, kind, run_id)
        self._conn = None

    def client_names(self) -> list[str | None]:
        if self._conn is None:
            try:
                import psycopg2  # lazily: optional on hosts
            except ImportError:
                raise ProbeError("psycopg2 is not installed") from None
            self._conn = psycopg2.connect(libpq_url(url_from_env(self.role)), connect_timeout=int(PROBE_TIMEOUT_S))
            self._conn.autocommit = True  # pg_stat_activity is a per-transaction snapshot
        try:
            with self._conn.cursor() as cur:
                cur.execute("SELECT application_name FROM pg_stat_activity WHERE datname = current_database()")
                return [r[0] for r in cur.fetchall()]
        except Exception:
            self.close()  # reconnect next time: the server may have restarted
            raise

    def close(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            conn.close()


def remove_postgres(target: str, url: str, names: RunNames) -> int:
    """The results of the run's tasks, by task id (a PostgreSQL backend's rows carry no run id):
    each host removes those of the tasks its workers ran (workloads/host/hostrun.py)."""
    if target != BACKEND or not names.task_ids:
        return 0
    import psycopg2
    from psycopg2 import sql

    conn = psycopg2.connect(libpq_url(url), connect_timeout=10)
    try:
        with conn, conn.cursor() as cur:
            cur.execute("SELECT to_regclass(%s)", (names.result_table,))
            if cur.fetchone()[0] is None:  # no result stored yet on this database
                return 0
            cur.execute(
                sql.SQL("DELETE FROM {} WHERE task_id = ANY(%s)").format(sql.Identifier(names.result_table)),
                (list(names.task_ids),),
            )
            return cur.rowcount
    finally:
        conn.close()


def _local_start() -> list[list[str]]:
    versions = sorted((os.path.basename(p) for p in glob.glob("/etc/postgresql/*")), key=_version_key)
    return [["pg_ctlcluster", "--skip-systemctl-redirect", versions[-1] if versions else "VERSION", "main", "start"]]


def _version_key(name: str) -> tuple:
    return tuple(int(p) if p.isdigit() else 0 for p in name.split("."))


class PostgreSQL(Server):
    name, product = POSTGRES, "PostgreSQL"
    schemes = MappingProxyType({"postgresql": 5432, "postgres": 5432, "db+postgresql": 5432})
    url_form = "postgresql://postgres:{password}@{address}:{port}/postgres"
    local = (LocalService("PostgreSQL", POSTGRES, 5432, "pg_ctlcluster", "postgresql", 60, _local_start),)

    def ping(self, url: str, timeout: float) -> None:
        import psycopg2

        psycopg2.connect(libpq_url(url), connect_timeout=int(timeout)).close()

    def celery_backend_url(self, url: str) -> str:
        # Celery's database backend takes SQLAlchemy URLs; name the driver the hosts have
        # (SQLAlchemy 2.1 would pick psycopg 3 for a bare postgresql://).
        url = url.removeprefix("db+")
        for bare in ("postgresql://", "postgres://"):
            if url.startswith(bare):
                url = "postgresql+psycopg2://" + url[len(bare) :]
        return "db+" + url

    def client_name_settings(self, target: str, name: str, conf: Mapping[str, Any]) -> dict[str, Any]:
        if target != BACKEND:
            return super().client_name_settings(target, name, conf)
        engine = dict(conf.get("database_engine_options") or {})
        engine["connect_args"] = {**(engine.get("connect_args") or {}), "application_name": name}
        return {"database_engine_options": engine}

    def backend_version(self, app) -> str:
        from sqlalchemy import text

        session = app.backend.ResultSession()
        try:
            return "postgresql " + session.execute(text("SHOW server_version")).scalar()
        finally:
            session.close()

    def probe(self, role: str, run_id: str | None) -> PostgresProbe:
        return PostgresProbe(role, self.name, run_id)

    def remove_run(self, target: str, url: str, names: RunNames) -> int:
        return remove_postgres(target, url, names)

    def restart(self, place: Place, timeout: float = 60.0) -> float:
        """As roles/postgres: the cluster in ``place.dir`` (``postgres_data_dir``), restarted by its
        own ``pg_ctl`` as user postgres (fast mode: open sessions are ended), which waits for it."""
        if not os.path.exists(os.path.join(place.dir, "PG_VERSION")):
            raise RestartError(f"no PostgreSQL cluster provisioned by cmx in {place.dir}")
        version = open(os.path.join(place.dir, "PG_VERSION")).read().strip()
        found = glob.glob(f"/usr/lib/postgresql/{version}/bin/pg_ctl") or glob.glob("/usr/lib/postgresql/*/bin/pg_ctl")
        if not found:
            raise RestartError(f"no pg_ctl for PostgreSQL {version} on this host")
        began = time.monotonic()
        run(
            [
                "runuser",
                "-u",
                "postgres",
                "--",
                found[0],
                "-D",
                place.dir,
                "-l",
                f"{place.dir}/server.log",
                "-m",
                "fast",
                "-w",
                "-t",
                str(int(timeout)),
                "restart",
            ],
            timeout + 5,
        )
        return time.monotonic() - began
