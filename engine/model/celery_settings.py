"""``celery.*`` dimensions, typed from Celery's own settings table (``celery.app.defaults``).

Celery declares every setting once, with its type; we read that table rather than keep a copy,
so a setting a newer Celery adds is known the day it is installed. A value is checked against
the declared type strictly: YAML 1.1 reads ``no`` as a string (quoted) or a boolean (bare) and
Python counts ``True`` as the integer 1, and Celery itself would take either silently (a truthy
string turns ``task_acks_late`` on). Settings a dimension or the harness owns are refused with
what to use instead (``cmx.workloads.runtime.spec.OWNED_SETTINGS``, the one table the app factory reads too).
"""

from __future__ import annotations

import json
from functools import lru_cache
from typing import Any

from cmx.engine.errors import suggest
from cmx.workloads.runtime.spec import OWNED_SETTINGS, owned_key_problem, owned_setting_problem

PREFIX = "celery."

# Where Celery's declared type is narrower than what Celery really accepts (it declares the
# type of the default, and some defaults are None): the types we check instead.
_TYPE_FIXES: dict[str, tuple[str, ...]] = {
    "task_default_priority": ("int",),  # declared 'string'; a priority is 0-255
    "task_default_delivery_mode": ("int", "string"),  # 2 or 'persistent'
    "cassandra_port": ("int", "string"),
    "beat_cron_starting_deadline": ("int",),  # declared as the class int, not 'int'
    "result_compression": ("string",),  # declared 'str'
    "security_key_password": ("string",),  # declared 'bytes': YAML gives a string
}

#: How each type reads in a message.
_WORDS = {
    "bool": "a boolean (true or false)",
    "int": "an integer",
    "float": "a number",
    "string": "a string",
    "dict": "a mapping",
    "list": "a list",
    "tuple": "a list",
    "any": "a JSON value",
}


@lru_cache(maxsize=1)
def _table() -> dict[str, tuple[tuple[str, ...], bool]]:
    """{setting: (accepted types, whether null is accepted)} for Celery's new-style lowercase names.
    Null is accepted where Celery's own default is None (the setting is unset by default)."""
    from celery.app.defaults import NAMESPACES, flatten

    table = {}
    for name, option in flatten(NAMESPACES):
        declared = option.type if isinstance(option.type, str) else getattr(option.type, "__name__", "any")
        types = _TYPE_FIXES.get(name, (declared,))
        table[name] = (tuple(t if t in _WORDS else "any" for t in types), option.default is None)
    return table


def known_settings() -> frozenset[str]:
    """Celery's setting names (lowercase, new style), e.g. ``task_acks_late``."""
    return frozenset(_table())


def name_problem(name: str) -> str | None:
    """Why ``name`` (``celery.SETTING``) is not a dimension, or None when it is."""
    setting = name[len(PREFIX) :]
    if setting not in _table():
        return (
            f"unknown Celery setting '{name}' (use a lowercase setting name such as "
            f"celery.task_acks_late)" + suggest(setting, _table(), PREFIX)
        )
    return owned_setting_problem(setting)


def _is_json(value: Any) -> bool:
    if value is None or isinstance(value, (str, bool, int, float)):
        return True
    if isinstance(value, list):
        return all(_is_json(v) for v in value)
    if isinstance(value, dict):
        return all(isinstance(k, str) and _is_json(v) for k, v in value.items())
    return False


def _fits(kind: str, value: Any) -> bool:
    if kind == "bool":
        return isinstance(value, bool)
    if kind == "int":
        return isinstance(value, int) and not isinstance(value, bool)
    if kind == "float":
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if kind == "string":
        return isinstance(value, str)
    if kind == "dict":
        return isinstance(value, dict) and _is_json(value)
    if kind in ("list", "tuple"):
        return isinstance(value, list) and _is_json(value)
    return _is_json(value)


def check_value(name: str, value: Any) -> Any:
    """``value`` unchanged when it has the type Celery declares for ``name`` (``celery.SETTING``);
    else ValueError with a one-line message. Assumes ``name`` passed :func:`name_problem`."""
    setting = name[len(PREFIX) :]
    types, nullable = _table()[setting]
    if (value is None and nullable) or any(_fits(kind, value) for kind in types):
        problem = owned_key_problem(setting, value)
        if problem:
            raise ValueError(problem)
        return value
    wanted = " or ".join(dict.fromkeys(_WORDS[kind] for kind in types))
    if nullable:
        wanted += " or null"
    shown = json.dumps(value, default=str) if _is_json(value) else repr(value)
    raise ValueError(f"{name}: Celery takes {wanted}, got {shown}")


__all__ = ["OWNED_SETTINGS", "check_value", "known_settings", "name_problem"]
