"""Inventories are read by Ansible's own parser (files, directories, group_vars, vault) and the
variables cmx reads are checked, each refusal one line naming host and variable (issue #14).

Real Ansible (InventoryManager, ansible-vault's Python API); no hosts are contacted."""

import textwrap

import pytest
from ansible.parsing.vault import VaultLib, VaultSecret

from cmx.engine.errors import InputError
from cmx.engine.hosts.inventory import load_inventory
from tests.conftest import REPO, cmx

GROUPS = """
all:
  vars: {ansible_connection: local}
  children:
    brokers: {hosts: {h1: BROKER}}
    workers: {hosts: {h1: {}}}
    drivers: {hosts: {h1: {}}}
"""


def inventory(tmp_path, broker_vars: str = "{}", name: str = "inv.yml"):
    path = tmp_path / name
    path.write_text(textwrap.dedent(GROUPS).replace("BROKER", broker_vars))
    return path


def refused(path, **kw) -> str:
    with pytest.raises(InputError) as info:
        load_inventory(path, secrets_dir=path.parent / "results", **kw)
    assert info.value.exit_code == 2
    [problem] = info.value.problems
    assert "\n" not in str(problem)
    return str(problem)


@pytest.mark.parametrize(
    "value, words",
    [
        ("12345", "broker_url must be a URL string (or a list of them), got 12345 (a number)"),
        ("true", "broker_url must be a URL string (or a list of them), got true (a boolean)"),
        ("'redis://:pw@[::1'", "broker_url is not a valid URL"),
        ("'redis://:pw@localhost:99999/0'", "broker_url is not a valid URL"),
        ("localhost:6379", "broker_url must be a URL such as"),
        ("[]", "broker_url is an empty list"),
        ("[redis://localhost:6379/0, 7]", "broker_url item 2 must be a URL string, got 7 (a number)"),
        ("{a: 1}", "broker_url must be a URL string (or a list of them), got a mapping"),
    ],
)
def test_broker_url_types_and_syntax(tmp_path, value, words):
    path = inventory(tmp_path, f"{{broker_url: {value}}}")
    message = refused(path)
    assert message.startswith(f"{path}: host 'h1': ") and words in message, message
    assert ":pw@" not in message  # the URL may hold a password: it is not echoed


@pytest.mark.parametrize(
    "var, value, words",
    [
        ("redis_port", "'abc'", "redis_port must be a port number (1-65535), got 'abc'"),
        ("redis_port", "70000", "redis_port must be a port number (1-65535), got 70000 (a number)"),
        ("redis_port", "true", "redis_port must be a port number (1-65535), got true (a boolean)"),
        ("redis_password", "[a, b]", "redis_password must be a string (quote it), got a value"),
        ("rabbitmq_api_url", "15672", "rabbitmq_api_url must be a URL string"),
        ("cmx_workdir", "[/tmp]", "cmx_workdir must be a string, got a list"),
        ("cmx_disposable", "1", "cmx_disposable must be true or false, got 1 (a number)"),
        ("cmx_disposable", "sure", "cmx_disposable must be true or false, got 'sure'"),
        ("rabbitmq_dist_port", "0", "rabbitmq_dist_port must be a port number (1-65535), got 0 (a number)"),
        ("rabbitmq_base_dir", "[/a]", "rabbitmq_base_dir must be a string, got a list"),
    ],
)
def test_other_variables(tmp_path, var, value, words):
    message = refused(inventory(tmp_path, f"{{{var}: {value}}}"))
    assert f"host 'h1': {words}" in message, message


def test_good_values_are_plain_python(tmp_path):
    inv = load_inventory(
        inventory(
            tmp_path,
            "{broker_url: [redis://localhost:6379/0, 'amqp://g:g@[::1]:5672//'], "
            "redis_port: '6380', redis_password: s3cret}",
        )
    )
    assert inv.hostvars["h1"] == {
        "broker_url": ["redis://localhost:6379/0", "amqp://g:g@[::1]:5672//"],
        "redis_port": 6380,
        "redis_password": "s3cret",
    }
    assert type(inv.hostvars["h1"]["redis_password"]) is str
    assert inv.broker_url("redis") == "redis://localhost:6379/0"


def test_cmx_disposable_is_a_boolean(tmp_path):
    """The flag that lets restart_broker restart a broker given by URL is read, as a boolean."""
    for given, read in (("true", True), ("false", False), ("'yes'", True)):
        assert load_inventory(inventory(tmp_path, f"{{cmx_disposable: {given}}}")).hostvars["h1"] == {
            "cmx_disposable": read
        }


def test_ini_inventory(tmp_path):
    path = tmp_path / "hosts.ini"
    path.write_text(
        "[brokers]\nh1 broker_url=redis://127.0.0.1:6379/3\n[workers]\nh1\nh2\n[drivers]\nh2\n"
        "[all:vars]\nansible_connection=local\n"
    )
    inv = load_inventory(path)
    assert inv.hosts_of("workers") == ("h1", "h2") and inv.broker_url("redis") == "redis://127.0.0.1:6379/3"
    path.write_text("[brokers]\nh1 broker_url=12345\n[workers]\nh1\n[drivers]\nh1\n")
    assert "host 'h1': broker_url must be a URL string" in refused(path)


def _vaulted(secret: str, password: str) -> str:
    token = VaultLib([("default", VaultSecret(password.encode()))]).encrypt(secret).decode()
    return "!vault |\n" + textwrap.indent(token, "  ")


@pytest.fixture
def lab(tmp_path):
    """An inventory directory, as Ansible labs have it: hosts.yml + group_vars/ with a vaulted password."""
    root = tmp_path / "inventory"
    (root / "group_vars").mkdir(parents=True)
    (root / "host_vars").mkdir()
    (root / "hosts.yml").write_text(
        textwrap.dedent("""
        all:
          vars: {ansible_connection: local}
          children:
            brokers: {hosts: {b1: {}}}
            workers: {hosts: {w1: {}, w2: {}}}
            drivers: {hosts: {w1: {}}}
    """)
    )
    (root / "group_vars" / "brokers.yml").write_text(
        "broker_url: redis://127.0.0.1:6379/5\nredis_password: " + _vaulted("s3cret-pw", "hunter2") + "\n"
    )
    (root / "host_vars" / "w2.yml").write_text("cmx_workdir: /var/tmp/cmx-w2\n")
    (tmp_path / "vault-pass").write_text("hunter2\n")
    return root


def test_directory_with_group_vars_and_vault(lab, monkeypatch):
    monkeypatch.setenv("ANSIBLE_VAULT_PASSWORD_FILE", str(lab.parent / "vault-pass"))
    inv = load_inventory(lab, secrets_dir=lab.parent / "results")
    assert inv.groups == {"brokers": ("b1",), "workers": ("w1", "w2"), "drivers": ("w1",)}
    assert inv.hostvars["b1"]["broker_url"] == "redis://127.0.0.1:6379/5"
    assert inv.password("redis") == "s3cret-pw" and type(inv.password("redis")) is str
    assert inv.hostvars["w2"] == {"cmx_workdir": "/var/tmp/cmx-w2"}
    assert not (lab.parent / "results").exists()  # the vaulted password was used, none generated


def test_vault_without_password(lab, monkeypatch):
    monkeypatch.delenv("ANSIBLE_VAULT_PASSWORD_FILE", raising=False)
    message = refused(lab)
    assert message.startswith(f"{lab}: host 'b1': redis_password is vault-encrypted and cannot be decrypted")
    assert "ANSIBLE_VAULT_PASSWORD_FILE" in message and "s3cret" not in message


def test_vault_with_the_wrong_password(lab, monkeypatch):
    (lab.parent / "wrong").write_text("nope\n")
    monkeypatch.setenv("ANSIBLE_VAULT_PASSWORD_FILE", str(lab.parent / "wrong"))
    assert "redis_password is vault-encrypted and cannot be decrypted" in refused(lab)


def test_missing_vault_password_file(lab, monkeypatch):
    monkeypatch.setenv("ANSIBLE_VAULT_PASSWORD_FILE", str(lab.parent / "absent"))
    assert "cannot read the vault password file" in refused(lab)


def test_bad_yaml_in_group_vars_has_its_position(lab):
    (lab / "group_vars" / "workers.yml").write_text("a: 1\nb: [unclosed\n")
    message = refused(lab)
    assert message.startswith(f"{lab / 'group_vars' / 'workers.yml'}:3:1: invalid YAML"), message


def test_group_vars_beside_an_inventory_file(tmp_path):
    path = inventory(tmp_path)
    (tmp_path / "group_vars").mkdir()
    (tmp_path / "group_vars" / "brokers.yml").write_text("broker_url: true\n")
    assert "host 'h1': broker_url must be a URL string" in refused(path)


def test_cli_accepts_an_inventory_directory(lab, monkeypatch):
    (lab / "group_vars" / "brokers.yml").write_text("broker_url: redis://127.0.0.1:6379/5\n")
    ok = cmx("validate", str(REPO / "experiments" / "quickstart.yaml"), "-i", str(lab), timeout=120)
    assert ok.returncode == 0, ok.stderr
    (lab / "group_vars" / "brokers.yml").write_text("broker_url: 12345\n")
    bad = cmx("validate", str(REPO / "experiments" / "quickstart.yaml"), "-i", str(lab), timeout=120)
    assert bad.returncode == 2 and "Traceback" not in bad.stderr
    assert bad.stderr.strip().splitlines() == [
        f"{lab}: host 'b1': broker_url must be a URL string (or a list of them), got 12345 (a number)"
    ]
