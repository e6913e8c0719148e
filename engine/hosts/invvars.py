"""The inventory variables cmx reads: one table of what each must be, checked once per host.

Ansible parses the inventory (YAML, INI, a directory with ``group_vars/`` and ``host_vars/``,
``!vault`` values); the values it hands back are its own tagged types, possibly still encrypted.
Here each variable cmx reads is decrypted with the user's usual vault password file
(``ANSIBLE_VAULT_PASSWORD_FILE`` / ``vault_password_file`` in ansible.cfg), turned into a plain
Python value, and checked for type and URL syntax, so that ``broker_url: 12345``,
``broker_url: true`` or ``redis://:pw@[::1`` is a one-line error naming host and variable
instead of a traceback (or a run that fails after provisioning).
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit

from cmx.engine.errors import InputError, Problem
from cmx.workloads.servers.registry import SERVERS

#: variable -> kind. url: one URL; urls: a URL or a list of them (a run picks the one whose
#: scheme fits); port: 1-65535; count: 1-99; secret: a string, never shown; text: a string; flag: true or
#: false. Each server declares its own (workloads/servers/: ``inventory_variables``: its
#: ``<service>_password`` and ``<service>_port``, and what else it reads).
VARIABLES: dict[str, str] = {
    "broker_url": "urls",
    "backend_url": "urls",
    "database_url": "url",
    "cmx_workdir": "text",
    "ansible_host": "text",
    "cmx_service_port": "port",
    # A broker given by URL that restart_broker may restart (its place: the server's variables).
    "cmx_disposable": "flag",
    **{name: kind for server in SERVERS.values() for name, kind in server.inventory_variables.items()},
}
PORT_VARS = tuple(name for name, kind in VARIABLES.items() if kind == "port")


def vault_loader():
    """An Ansible DataLoader that can decrypt ``!vault`` values and vaulted files with the vault
    password file(s) and identities configured the usual way; no prompt (cmx runs unattended)."""
    from ansible import constants as C
    from ansible.cli import CLI
    from ansible.parsing.dataloader import DataLoader
    from ansible.parsing.vault import VaultSecretsContext

    loader = DataLoader()
    # Read the configuration now, not at Ansible's import: the environment may have changed since.
    password_file = C.config.get_config_value("DEFAULT_VAULT_PASSWORD_FILE")
    identities = C.config.get_config_value("DEFAULT_VAULT_IDENTITY_LIST") or []
    try:
        secrets = CLI.setup_vault_secrets(
            loader,
            vault_ids=list(identities),
            vault_password_files=[password_file] if password_file else [],
            ask_vault_pass=False,
            auto_prompt=False,
            initialize_context=False,
        )
    except Exception as exc:  # Ansible's errors: a missing or unreadable password file
        raise InputError(
            Problem(
                f"cannot read the vault password file: {_first_line(exc)}",
                str(password_file or "ANSIBLE_VAULT_IDENTITY_LIST"),
            )
        ) from None
    loader.set_vault_secrets(secrets)
    # Encrypted values decrypt through a process-wide context that Ansible lets be set only once.
    context = VaultSecretsContext.current(optional=True)
    if context is None:
        VaultSecretsContext.initialize(VaultSecretsContext(secrets))
    else:
        context.secrets[:] = secrets
    return loader


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def _what(value: Any) -> str:
    if isinstance(value, bool):
        return f"{str(value).lower()} (a boolean)"
    if isinstance(value, int):
        return f"{value} (a number)"
    if isinstance(value, float):
        return f"{value} (a number)"
    if isinstance(value, (list, tuple)):
        return "a list"
    if isinstance(value, dict):
        return "a mapping"
    return type(value).__name__


def plain(value: Any) -> Any:
    """Ansible's value as plain Python (its tagged str/int/list types, decrypted). Raises
    whatever Ansible raises when an encrypted value cannot be decrypted."""
    if isinstance(value, bool) or value is None:
        return value
    if isinstance(value, int):
        return int(value)
    if isinstance(value, float):
        return float(value)
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    if isinstance(value, dict):
        return {str(k): plain(v) for k, v in value.items()}
    return str(value).encode("utf-8", "surrogatepass").decode("utf-8", "surrogatepass")  # decrypts vault


def url_problem(url: str) -> str | None:
    """Why ``url`` is not a usable service URL, or None."""
    if not url.strip() or url != url.strip():
        return "must not be empty or start/end with spaces"
    if "://" not in url:
        return "must be a URL such as redis://host:6379/0 (scheme://...)"
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 (raises ValueError for a port that is not 0-65535)
        parts.hostname  # noqa: B018
    except ValueError as exc:
        return f"is not a valid URL ({exc})"
    if not parts.scheme:
        return "must start with a scheme such as redis:// or amqp://"
    if not parts.netloc and parts.scheme not in ("sqlite", "db+sqlite"):
        return "names no host (scheme://host:port/...)"
    return None


def check(file: str, host: str, name: str, raw: Any) -> Any:
    """The plain, checked value of cmx variable ``name`` on ``host``; InputError naming both."""

    def refuse(message: str) -> InputError:
        return InputError(Problem(f"host '{host}': {name} {message}", file))

    try:
        value = plain(raw)
    except Exception as exc:  # noqa: BLE001 (Ansible's vault errors have no common base we can import cheaply)
        hint = "set ANSIBLE_VAULT_PASSWORD_FILE (or vault_password_file in ansible.cfg)"
        raise refuse(f"is vault-encrypted and cannot be decrypted ({_first_line(exc)}): {hint}") from None
    kind = VARIABLES[name]
    if kind == "port":
        if (
            isinstance(value, bool)
            or not (isinstance(value, int) or (isinstance(value, str) and value.isdigit()))
            or not 0 < int(value) < 65536
        ):
            got = _what(value) if not isinstance(value, str) else repr(value)
            raise refuse(f"must be a port number (1-65535), got {got}")
        return int(value)
    if kind == "count":
        if (
            isinstance(value, bool)
            or not (isinstance(value, int) or (isinstance(value, str) and value.isdigit()))
            or not 0 < int(value) < 100
        ):
            got = _what(value) if not isinstance(value, str) else repr(value)
            raise refuse(f"must be a whole number from 1 to 99, got {got}")
        return int(value)
    if kind == "flag":  # an INI inventory's `cmx_disposable=true` is the string 'true'
        if isinstance(value, str) and value.lower() in ("true", "false", "yes", "no"):
            return value.lower() in ("true", "yes")
        if not isinstance(value, bool):
            raise refuse(f"must be true or false, got {_what(value) if not isinstance(value, str) else repr(value)}")
        return value
    if kind == "urls" and isinstance(value, list):
        if not value:
            raise refuse("is an empty list: give a URL, or a list of URLs")
        for index, item in enumerate(value, 1):
            if not isinstance(item, str):
                raise refuse(f"item {index} must be a URL string, got {_what(item)}")
            problem = url_problem(item)
            if problem:
                raise refuse(f"item {index} {problem}")
        return value
    if not isinstance(value, str):
        want = {
            "urls": "a URL string (or a list of them)",
            "url": "a URL string",
            "secret": "a string (quote it)",
            "text": "a string",
        }[kind]
        shown = "a value" if kind == "secret" else _what(value)  # never echo a password
        raise refuse(f"must be {want}, got {shown}")
    if kind in ("url", "urls"):
        problem = url_problem(value)
        if problem:
            raise refuse(problem)
    return value
