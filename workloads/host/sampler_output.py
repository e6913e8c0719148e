"""What the sampler writes: its files in the run dir, and its error list with every secret redacted.

URLs (they carry passwords) are never printed or written: ErrorLog replaces every secret the
sampler's environment holds before a message is kept.
"""

from __future__ import annotations

import csv
import os
import re
import threading
import urllib.parse
from pathlib import Path

from cmx.workloads.vocab.services import is_server_secret

SAMPLES_HEADER = ("host", "pid", "role", "ts", "rss_bytes", "pss_bytes", "cpu_percent")
PEAKS_HEADER = ("host", "pid", "role", "name", "vmhwm_bytes")

_USERINFO_RE = re.compile(r"(//)[^/@\s]+@")


class Output:
    """The run dir's files: time series appended, small files replaced atomically."""

    def __init__(self, run_dir: Path) -> None:
        self.run_dir = run_dir

    def replace(self, name: str, text: str) -> None:
        tmp = self.run_dir / f"{name}.tmp"
        tmp.write_text(text)
        os.replace(tmp, self.run_dir / name)

    def replace_csv(self, name: str, header: tuple, rows: list[tuple]) -> None:
        tmp = self.run_dir / f"{name}.tmp"
        with open(tmp, "w", newline="") as f:
            writer = csv.writer(f, lineterminator="\n")
            writer.writerow(header)
            writer.writerows(rows)
        os.replace(tmp, self.run_dir / name)

    def append_csv(self, name: str, rows: list[tuple]) -> None:
        if rows:
            with open(self.run_dir / name, "a", newline="") as f:
                csv.writer(f, lineterminator="\n").writerows(rows)


class ErrorLog:
    """Probe failures, each kind recorded once, with every known secret redacted."""

    def __init__(self, secrets: list[str]) -> None:
        self.items: list[str] = []
        self._seen: set[str] = set()
        self._secrets = sorted({s for s in secrets if s}, key=len, reverse=True)
        self._lock = threading.Lock()

    def redact(self, text: str) -> str:
        for secret in self._secrets:
            text = text.replace(secret, "***")
        return _USERINFO_RE.sub(r"\1***@", text)

    def record(self, where: str, error: BaseException | str) -> None:
        message = error if isinstance(error, str) else f"{type(error).__name__}: {error}"
        with self._lock:
            if where not in self._seen:
                self._seen.add(where)
                self.items.append(self.redact(f"{where}: {message}"))


def secrets_from_env() -> list[str]:
    """Every secret the run's environment gives this host (URLs, and their passwords both ways)."""
    secrets = []
    for name, value in os.environ.items():
        if name.startswith("CMX_") and (name.endswith("_URL") or is_server_secret(name)) and value:
            secrets.append(value)
            try:
                password = urllib.parse.urlsplit(value).password
            except ValueError:
                password = None
            if password:
                secrets += [password, urllib.parse.unquote(password)]
    return secrets
