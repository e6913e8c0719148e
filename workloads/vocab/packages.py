"""The Python packages whose versions every worker and driver reports (workloads/runtime/fingerprint.py)
and a cell may choose (the ``package.NAME`` dimension, workloads/vocab/dimensions.py)."""

from __future__ import annotations

PACKAGES = ("celery", "kombu", "billiard", "redis", "amqp", "pika")
