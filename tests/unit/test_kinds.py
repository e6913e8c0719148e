"""Broker and backend kinds live in one table (workloads/vocab/kinds.py); the inventory, provisioning,
the probes, the roles and the app factory read it and agree with it."""

from pathlib import Path

import pytest
import yaml

from cmx.engine.hosts.inventory import Inventory
from cmx.engine.hosts.invvars import VARIABLES
from cmx.engine.hosts.provision import _service_vars
from cmx.workloads.vocab import kinds
from cmx.workloads.servers import registry as servers
from cmx.workloads.app.factory import backend_url, name_clients
from cmx.workloads.vocab.clientname import client_name
from cmx.workloads.host import connprobes
from cmx.workloads.runtime.spec import RunSpec
from cmx.workloads.vocab.services import SERVICE_NAMES
from tests.conftest import REPO

PLAYBOOKS = REPO / "engine" / "hosts" / "playbooks"


def lab(**broker_vars) -> Inventory:
    """Broker and backend on one host ``b`` (reached as 10.0.0.1), passwords given."""
    hostvars = {
        "b": {
            "ansible_host": "10.0.0.1",
            "redis_password": "rpw",
            "rabbitmq_password": "qpw",
            "postgres_password": "ppw",
            **broker_vars,
        }
    }
    return Inventory(
        path=Path("inv.yml"),
        hostvars=hostvars,
        groups={"brokers": ("b",), "backends": ("b",), "workers": ("w",), "drivers": ("w",)},
    )


def test_the_urls_of_the_servers_a_sweep_provisions():
    inv = lab()
    assert inv.broker_url("redis") == "redis://:rpw@10.0.0.1:6379/0"
    assert inv.backend_url("redis") == "redis://:rpw@10.0.0.1:6379/1"
    assert inv.broker_url("rabbitmq") == inv.broker_url("rabbitmq-quorum") == "amqp://cmx:qpw@10.0.0.1:5672//"
    assert inv.backend_url("postgres") == "postgresql://postgres:ppw@10.0.0.1:5432/postgres"
    assert inv.backend_url("none") is None and inv.backend_url("rpc") is None
    moved = lab(redis_port=6390, rabbitmq_port=5673, postgres_port=5433)
    assert moved.broker_url("redis") == "redis://:rpw@10.0.0.1:6390/0"
    assert moved.broker_url("rabbitmq") == "amqp://cmx:qpw@10.0.0.1:5673//"
    assert moved.backend_url("postgres") == "postgresql://postgres:ppw@10.0.0.1:5433/postgres"


def test_a_given_url_is_used_for_the_kinds_its_scheme_serves_and_nothing_is_provisioned_for_them():
    inv = lab(broker_url=["amqps://u:p@mq:5671/v", "rediss://:x@r:6380/2"], backend_url="db+postgresql://u:p@pg/db")
    assert inv.broker_url("rabbitmq-quorum") == "amqps://u:p@mq:5671/v"
    assert inv.broker_url("redis") == "rediss://:x@r:6380/2"
    assert inv.backend_url("postgres") == "db+postgresql://u:p@pg/db"
    assert inv.backend_url("redis") == "redis://:rpw@10.0.0.1:6379/1"  # not given: ours
    assert inv.services_to_provision({"redis", "rabbitmq", "rabbitmq-quorum"}, {"none", "rpc", "postgres"}) == {}
    assert inv.services_to_provision({"redis"}, {"redis", "rpc"}) == {"redis": ["b"]}
    assert lab().services_to_provision({"rabbitmq-quorum", "redis"}, {"postgres", "none"}) == {
        "postgres": ["b"],
        "rabbitmq": ["b"],
        "redis": ["b"],
    }


def test_every_kind_names_a_known_server_and_every_server_can_be_reached_counted_and_provisioned():
    for target, table in kinds.TARGETS.items():
        for name, kind in table.items():
            assert kind.name == name
            assert kind.service is None or kind.service in servers.SERVERS, (target, name)
            assert kind.provisionable <= (kind.service is not None)
    assert set(servers.SERVERS) == set(connprobes.CONNECTION_KINDS) == set(SERVICE_NAMES)
    for server in servers.SERVERS.values():  # what every server must do: count, clean up, restart, ping
        for behaviour in ("probe", "remove_run", "restart", "ping"):
            assert getattr(type(server), behaviour) is not getattr(servers.Server, behaviour), (server.name, behaviour)
    brokers = {k.service for k in kinds.BROKERS.values()}
    for server in (servers.get(name) for name in brokers):  # a broker's server can publish, fast and raw
        for behaviour in ("fast_publisher", "raw_client", "broker_version", "client_name_settings"):
            assert getattr(type(server), behaviour) is not getattr(servers.Server, behaviour), (server.name, behaviour)
    # The services plays apply each server's role by the server's name, on the hosts the
    # controller names for it (no play names a server: they loop over what the registry gives).
    for playbook, entry in (("services.yml", None), ("services_stop.yml", "stop")):
        [play] = yaml.safe_load((PLAYBOOKS / playbook).read_text())
        assert play["hosts"] == "{{ cmx_service_hosts | default('cmx-no-service-host') }}"
        [task] = play["tasks"]
        assert task["ansible.builtin.include_role"].get("tasks_from") == entry
        assert task["ansible.builtin.include_role"]["name"] == "{{ cmx_service.name }}"
        assert "cmx_services" in task["loop"] and task["loop_control"]["loop_var"] == "cmx_service"
    for service in servers.SERVERS.values():
        # The password and port each server's role reads from the inventory are checked there.
        assert VARIABLES[service.password_var] == "secret" and VARIABLES[service.port_var] == "port"
        types = {"url", "urls", "port", "count", "secret", "text", "flag"}
        assert set(service.variables.values()) <= types, service.name
        role = REPO / "roles" / service.name
        assert (role / "meta" / "main.yml").is_file() and (role / "tasks" / "stop.yml").is_file()
        assert _service_vars({service.name: ["h"]})["cmx_services"] == [{"name": service.name, "hosts": ["h"]}]
        for var in service.role_vars:  # role parameters the role declares
            assert var in yaml.safe_load((role / "defaults" / "main.yml").read_text()), (service.name, var)


def test_schemes_and_default_ports():
    assert servers.schemes("broker", "rabbitmq-quorum") == ("amqp", "amqps", "pyamqp")
    assert servers.schemes("backend", "postgres") == ("postgresql", "postgres", "db+postgresql")
    assert servers.schemes("backend", "rpc") == ()
    assert [servers.default_port(s) for s in ("redis", "amqp", "amqps", "postgresql", "sentinel", "http")] == [
        6379,
        5672,
        5671,
        5432,
        26379,
        None,
    ]
    assert servers.libpq_url("db+postgresql+psycopg2://u:p@h:1/d") == "postgresql://u:p@h:1/d"
    assert servers.of_scheme("pyamqp").name == "rabbitmq"
    with pytest.raises(ValueError, match="no server of cmx takes sqs:// URLs"):
        servers.of_scheme("sqs")


def test_an_unknown_server_is_an_error_never_another_servers_branch():
    with pytest.raises(ValueError, match="unknown server 'sqs'"):
        servers.get("sqs")
    with pytest.raises(NotImplementedError, match="PostgreSQL has no raw client"):
        servers.get("postgres").raw_client("postgresql://h/d", "q", "n", {}, False, 1)


def spec(broker: str, backend: str) -> RunSpec:
    return RunSpec(
        run_id="r1", experiment="e", cell_id="c", repeat=1, workload="throughput", broker=broker, backend=backend
    )


def test_the_app_factory_reads_queue_arguments_and_backend_urls_from_the_kinds(monkeypatch):
    assert spec("rabbitmq-quorum", "none").queue_arguments() == {"x-queue-type": "quorum"}
    assert spec("rabbitmq", "none").queue_arguments() == spec("redis", "none").queue_arguments() == {}
    expiring = spec("rabbitmq-quorum", "none").model_copy(update={"queue_expires_s": 90.5})
    assert expiring.queue_arguments() == {"x-queue-type": "quorum", "x-expires": 90500}
    # kombu's Redis emulation of x-expires costs PEXPIREs per message: there a keeper sets TTLs
    assert expiring.model_copy(update={"broker": "redis"}).queue_arguments() == {}
    monkeypatch.setenv("CMX_BACKEND_URL", "postgresql://u:p@h:5432/d")
    assert backend_url(spec("redis", "postgres")) == "db+postgresql+psycopg2://u:p@h:5432/d"
    assert backend_url(spec("redis", "rpc")) == "rpc://"
    assert backend_url(spec("redis", "none")) is None
    monkeypatch.setenv("CMX_BACKEND_URL", "redis://h:6379/1")
    assert backend_url(spec("redis", "redis")) == "redis://h:6379/1"


@pytest.mark.parametrize("broker, backend", [("redis", "redis"), ("rabbitmq", "postgres"), ("rabbitmq-quorum", "rpc")])
def test_every_client_names_itself_to_the_broker_and_the_backend(broker, backend):
    from celery import Celery

    app = Celery("t", set_as_current=False)
    app.conf.broker_transport_options = {"visibility_timeout": 99, "client_properties": {"x": 1}}
    app.conf.database_engine_options = {"echo": False}
    name_clients(app, spec(broker, backend), "driver")
    want_broker, want_backend = client_name("r1", "driver", "broker"), client_name("r1", "driver", "backend")
    opts = app.conf.broker_transport_options
    assert opts["visibility_timeout"] == 99  # the cell's own options are kept
    if broker == "redis":
        assert opts["client_name"] == want_broker
    else:
        assert opts["client_properties"] == {"x": 1, "connection_name": want_broker}
    if backend == "redis":
        assert app.conf.redis_client_name == want_backend
    elif backend == "postgres":
        assert app.conf.database_engine_options == {"echo": False, "connect_args": {"application_name": want_backend}}
    else:
        assert app.conf.get("redis_client_name") is None and "connect_args" not in app.conf.database_engine_options


def _enums_under(node, key: str) -> list[frozenset]:
    """Every ``enum`` in the subtrees of ``node`` held under ``key``."""
    found = []
    if isinstance(node, dict):
        for k, v in node.items():
            if k == key:
                found += [frozenset(n["enum"]) for n in _walk(v) if isinstance(n, dict) and "enum" in n]
            found += _enums_under(v, key)
    elif isinstance(node, list):
        for v in node:
            found += _enums_under(v, key)
    return found


def _walk(node):
    yield node
    for v in node.values() if isinstance(node, dict) else node if isinstance(node, list) else ():
        yield from _walk(v)


def test_the_experiment_and_the_run_spec_offer_exactly_the_registrys_kinds():
    from pydantic import ValidationError

    from cmx.engine.model.schema import experiment_schema

    schema = experiment_schema()
    for target, table in kinds.TARGETS.items():
        enums = set(_enums_under(schema, target))
        assert enums == {frozenset(table)}, target
        for name in table:
            assert getattr(spec(**{"broker": "redis", "backend": "none", target: name}), target) == name
        with pytest.raises(ValidationError):
            spec(**{"broker": "redis", "backend": "none", target: "kafka"})


def test_each_server_declares_its_capabilities_and_answers_the_controllers_hooks():
    assert [s.name for s in servers.with_capability("restartable")] == ["redis", "rabbitmq"]
    assert [s.name for s in servers.with_capability("failover")] == ["redis_sentinel"]
    assert [s.name for s in servers.with_capability("visibility_timeout")] == ["redis", "redis_sentinel"]
    assert [s.name for s in servers.with_capability("heartbeats")] == ["rabbitmq", "rabbitmq_cluster"]
    assert [s.name for s in servers.with_capability("node_loss")] == ["rabbitmq_cluster"]
    rabbit = servers.get("rabbitmq")
    # The node a sweep provisions serves its management API; a node given by URL only where the inventory says.
    assert rabbit.secrets(lab()) == {"CMX_RABBITMQ_API": "http://cmx:qpw@10.0.0.1:15672"}
    assert rabbit.secrets(lab(rabbitmq_management_port=15673))["CMX_RABBITMQ_API"].endswith(":15673")
    assert rabbit.secrets(lab(broker_url="amqp://u:p@mq//")) == {"CMX_RABBITMQ_API": ""}
    assert rabbit.secrets(lab(broker_url="amqp://u:p@mq//", rabbitmq_api_url="http://u:p@mq:15672")) == {
        "CMX_RABBITMQ_API": "http://u:p@mq:15672"
    }
    assert servers.get("redis").secrets(lab()) == {} and servers.get("redis").provision_vars(lab()) == {}
    assert [p.var for p in rabbit.parts] == ["rabbitmq_api_url"]
    from cmx.workloads.host.hostrun import is_secret

    for server in servers.SERVERS.values():  # the agent, hostrun and the sampler's redaction know them by their form
        assert all(is_secret(name) for name in server.secret_names), server.name


def test_a_workload_waiting_for_results_on_no_backend_is_told_the_kinds_that_keep_them(tmp_path):
    from cmx.cli.checks import check_against_inventory
    from cmx.engine.errors import InputError
    from cmx.engine.hosts.inventory import load_inventory
    from cmx.engine.model.cells import expand
    from cmx.engine.model.load import load_experiment
    from cmx.engine.paths import BUILTIN_INVENTORY

    path = tmp_path / "e.yaml"
    path.write_text("name: e\nworkload: {name: io_chord}\nfixed: {backend: none}\n")
    exp = load_experiment(str(path))
    with pytest.raises(InputError) as info:
        check_against_inventory(exp, expand(exp), load_inventory(BUILTIN_INVENTORY, tmp_path))
    assert [p.message for p in info.value.problems] == [
        "workload io_chord waits for task results: set backend to redis, rpc or postgres (not none)"
    ]


def test_the_inventory_variables_the_servers_declare_are_the_ones_cmx_always_read():
    """The inventory's format is a contract: moving each server's variables into its module kept them."""
    assert {
        k: v
        for k, v in VARIABLES.items()
        if not k.endswith(("_password", "_port"))
        or k in ("rabbitmq_management_port", "redis_sentinel_redis_port", "rabbitmq_dist_port", "cmx_service_port")
    } == {
        "broker_url": "urls",
        "backend_url": "urls",
        "database_url": "url",
        "cmx_workdir": "text",
        "ansible_host": "text",
        "cmx_service_port": "port",
        "cmx_disposable": "flag",
        "redis_dir": "text",
        "rabbitmq_api_url": "url",
        "rabbitmq_management_port": "port",
        "rabbitmq_base_dir": "text",
        "rabbitmq_nodename": "text",
        "rabbitmq_dist_port": "port",
        "redis_sentinel_redis_port": "port",
        # A RabbitMQ cluster's (issue 42): its node count and where its nodes keep their files.
        "rabbitmq_cluster_nodes": "count",
        "rabbitmq_cluster_base_dir": "text",
    }
    for name in SERVICE_NAMES:
        assert VARIABLES[f"{name}_password"] == "secret" and VARIABLES[f"{name}_port"] == "port"
