"""``sql_fanout``'s data and SQL: the generated table, the request's queries, and running them
from a client (``direct``: one after another; ``union``: one ``UNION ALL``). The workload and its
worker side are in sql_fanout.py.
"""

from __future__ import annotations

COUNTRIES = (
    "US",
    "CN",
    "JP",
    "GB",
    "DE",
    "FR",
    "KR",
    "BR",
    "IN",
    "RU",
    "CA",
    "AU",
    "IT",
    "ES",
    "MX",
    "NL",
    "SE",
    "CH",
    "TR",
    "PL",
)
CATEGORIES = 20
FEEDS = (1000, 1001, 1002)  # the study's feeds
DEVICES = ("ios", "android")
WINDOW_DAYS = 60
#: Two-int advisory lock key (class, rows): runs creating the same table wait for each other.
LOCK_CLASS = 0x636D78  # "cmx"


def table_name(rows: int) -> str:
    return f"cmx_sql_fanout_{rows}"


def create_table_sql(rows: int) -> list[str]:
    """Statements creating the table of ``rows`` rows. Every column comes from its own seeded hash
    of the row number, so columns are independent and the data is the same on every server."""
    t = table_name(rows)
    countries = "ARRAY[" + ",".join(f"'{c}'" for c in COUNTRIES) + "]"
    h = "abs(hashint8extended(i, {}))"
    return [
        f"""CREATE TABLE {t} AS
            SELECT i AS id,
                   (ARRAY['ios', 'android'])[1 + {h.format(1)} % 2] AS device,
                   ({h.format(2)} % 1000)::int AS app_id,
                   ({FEEDS[0]} + {h.format(3)} % {len(FEEDS)})::int AS feed,
                   ({h.format(4)} % {CATEGORIES})::int AS category,
                   ({countries})[1 + {h.format(5)} % {len(COUNTRIES)}] AS country,
                   DATE '2014-01-01' + ({h.format(6)} % 365)::int AS day,
                   ({h.format(7)} % 1000)::int AS downloads,
                   {h.format(8)} % 100000 AS revenue_cents
            FROM generate_series(1::bigint, {rows}::bigint) AS i""",
        f"CREATE INDEX ON {t} (category, day)",
        f"CREATE INDEX ON {t} (app_id)",
        f"ANALYZE {t}",
    ]


def query_sql(rows: int, index: int, request_key: int) -> tuple[str, dict]:
    """Query ``index`` of request ``request_key``: per-country sums (exact integers) for one
    category, feed and device over a window that moves with the request."""
    sql = (
        f"SELECT country, sum(downloads)::bigint AS downloads, sum(revenue_cents)::bigint AS revenue_cents, "
        f"count(DISTINCT app_id) AS apps FROM {table_name(rows)} "
        "WHERE category = %(category)s AND feed = %(feed)s AND device = %(device)s "
        "AND day >= DATE '2014-01-01' + %(start)s AND day < DATE '2014-01-01' + %(end)s "
        "GROUP BY country"
    )
    start = (index * 7 + request_key * 3) % (365 - WINDOW_DAYS)
    params = {
        "category": index % CATEGORIES,
        "feed": FEEDS[index % len(FEEDS)],
        "device": DEVICES[(index // len(FEEDS)) % len(DEVICES)],
        "start": start,
        "end": start + WINDOW_DAYS,
    }
    return sql, params


def union_sql(rows: int, queries: int, request_key: int, cursor) -> str:
    """All queries of a request as one ``UNION ALL``, each row tagged with its query's index."""
    parts = []
    for i in range(queries):
        sql, params = query_sql(rows, i, request_key)
        parts.append(f"(SELECT {i} AS q, * FROM ({cursor.mogrify(sql, params).decode()}) AS q{i})")
    return " UNION ALL ".join(parts)


Result = list[list[list]]  # per query, its rows sorted: [country, downloads, revenue_cents, apps]


def normalise(rows) -> list[list]:
    return sorted([list(r) for r in rows])


def run_direct(conn, rows: int, queries: int, request_key: int) -> Result:
    with conn.cursor() as cur:
        out = []
        for i in range(queries):
            cur.execute(*query_sql(rows, i, request_key))
            out.append(normalise(cur.fetchall()))
    conn.commit()  # end the read transaction: no snapshot held between requests
    return out


def run_union(conn, rows: int, queries: int, request_key: int) -> Result:
    with conn.cursor() as cur:
        cur.execute(union_sql(rows, queries, request_key, cur))
        got = cur.fetchall()
    conn.commit()
    out: Result = [[] for _ in range(queries)]
    for q, *row in got:
        out[q].append(row)
    return [normalise(r) for r in out]


def ensure_table(conn, rows: int) -> bool:
    """Create the table of ``rows`` rows unless it exists (True if created). Under an advisory lock,
    in one transaction: a concurrent run waits, and nobody ever sees half a table."""
    with conn.cursor() as cur:
        cur.execute("SELECT pg_advisory_xact_lock(%s, %s)", (LOCK_CLASS, rows))
        cur.execute("SELECT to_regclass(%s) IS NOT NULL", (table_name(rows),))
        if cur.fetchone()[0]:
            conn.commit()
            return False
        for statement in create_table_sql(rows):
            cur.execute(statement)
    conn.commit()
    return True
