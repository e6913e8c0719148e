"""Broker kind ``redis-sentinel``: where the set's servers run, its URL, and what Celery is given."""

from pathlib import Path

import pytest

from cmx.engine.hosts.inventory import Inventory
from cmx.engine.hosts.preflight import redact
from cmx.engine.hosts.provision import _service_vars
from cmx.workloads.vocab import kinds
from cmx.workloads.servers import redis_sentinel as sentinel
from cmx.workloads.servers import registry as servers
from cmx.workloads.runtime.spec import owned_key_problem


def lab(*hosts: str, **hostvars) -> Inventory:
    names = hosts or ("b",)
    return Inventory(
        path=Path("inv.yml"),
        groups={"brokers": names, "workers": ("w",), "drivers": ("w",)},
        hostvars={
            h: {"ansible_host": f"10.0.0.{i}", "redis_sentinel_password": "spw", **hostvars}
            for i, h in enumerate(names, 1)
        },
    )


def roles(inv: Inventory) -> list[tuple[str, str, int]]:
    return [(m.host, m.role, m.port) for m in sentinel.layout_of(inv, "brokers")]


def test_one_broker_host_runs_two_servers_and_three_sentinels_on_distinct_ports():
    assert roles(lab()) == [
        ("b", "master", 6380),
        ("b", "replica", 6381),
        ("b", "sentinel", 26379),
        ("b", "sentinel", 26380),
        ("b", "sentinel", 26381),
    ]
    assert roles(lab(redis_sentinel_redis_port=7000, redis_sentinel_port=27000))[1:3] == [
        ("b", "replica", 7001),
        ("b", "sentinel", 27000),
    ]


def test_several_broker_hosts_share_the_set_master_and_replica_apart():
    assert roles(lab("b1", "b2")) == [
        ("b1", "master", 6380),
        ("b2", "replica", 6380),
        ("b1", "sentinel", 26379),
        ("b2", "sentinel", 26379),
        ("b1", "sentinel", 26380),
    ]
    assert roles(lab("b1", "b2", "b3", "b4")) == [
        ("b1", "master", 6380),
        ("b2", "replica", 6380),
        ("b1", "sentinel", 26379),
        ("b2", "sentinel", 26379),
        ("b3", "sentinel", 26379),
    ]
    assert lab("b1", "b2").services_to_provision({"redis-sentinel", "redis"}, set()) == {
        "redis": ["b1"],
        "redis_sentinel": ["b1", "b2"],
    }


def test_the_url_names_every_sentinel_and_the_master_and_celery_gets_kombus_form():
    url = lab("b1", "b2").broker_url("redis-sentinel")
    assert url == (
        "sentinel://:spw@10.0.0.1:26379/0;sentinel://:spw@10.0.0.2:26379/0;"
        "sentinel://:spw@10.0.0.1:26380/0?master_name=cmx"
    )
    broker, options = sentinel.celery_broker(url)
    assert broker == url.split("?")[0]
    assert options == {"master_name": "cmx", "sentinel_kwargs": {"password": "spw"}}
    assert sentinel.sentinels(url) == ([("10.0.0.1", 26379), ("10.0.0.2", 26379), ("10.0.0.1", 26380)], "spw", "cmx")
    assert "spw" not in redact(url) and redact(url).count(":***@") == 3
    with pytest.raises(ValueError, match="master_name"):
        sentinel.split("sentinel://h:26379/0")


def test_a_given_sentinel_url_is_used_and_nothing_is_provisioned():
    given = "sentinel://:x@s1:26379/0;sentinel://:x@s2:26379/0?master_name=mymaster"
    inv = lab(broker_url=[given, "redis://:r@r:6379/0"])
    assert inv.broker_url("redis-sentinel") == given
    assert inv.services_to_provision({"redis-sentinel"}, set()) == {}
    assert sentinel.celery_broker(given)[1]["master_name"] == "mymaster"


def test_the_role_gets_the_layout_and_the_master_name_and_speaks_redis():
    inv = lab("b1", "b2")
    extravars = _service_vars(inv.services_to_provision({"redis-sentinel"}, set()), inv)
    assert extravars["cmx_services"] == [{"name": "redis_sentinel", "hosts": ["b1", "b2"]}]
    assert extravars["cmx_service_hosts"] == "b1,b2"
    assert extravars["redis_sentinel_dir"] == "{{ __cmx_workdir }}/redis_sentinel"  # its role's parameter
    assert "redis_sentinel_layout" not in _service_vars({"redis_sentinel": ["b1", "b2"]})  # stopping: defaults
    assert extravars["redis_sentinel_master_name"] == sentinel.MASTER_NAME
    assert extravars["redis_sentinel_layout"][0] == {
        "host": "b1",
        "address": "10.0.0.1",
        "role": "master",
        "port": 6380,
    }
    server = servers.get(kinds.BROKERS["redis-sentinel"].service)
    assert isinstance(server, sentinel.RedisSentinel) and server.connect is sentinel.master_client
    assert server.client_name_settings("broker", "n", {})["broker_transport_options"] == {"client_name": "n"}
    url = lab().broker_url("redis-sentinel")
    assert server.celery_broker(url) == sentinel.celery_broker(url)
    assert servers.get("redis").celery_broker("redis://h/0") == ("redis://h/0", {})


def test_the_master_name_and_sentinel_password_are_not_a_cells_to_set():
    assert "inventory" in owned_key_problem("broker_transport_options", {"master_name": "x"})
    assert owned_key_problem("broker_transport_options", {"sentinel_kwargs": {"password": "p"}})
    assert owned_key_problem("broker_transport_options", {"visibility_timeout": 10}) is None


def test_a_worker_consuming_from_another_kind_of_broker_fails_the_run():
    from cmx.workloads.drive.workerwatch import broker_mismatch
    from cmx.workloads.runtime.spec import RunSpec

    spec = RunSpec(run_id="r", experiment="e", cell_id="c", repeat=1, workload="throughput", broker="redis-sentinel")
    assert broker_mismatch(spec, {"broker_scheme": "sentinel"}) == []
    assert broker_mismatch(spec, {"broker_scheme": "redis"}) == [
        "cell asks broker redis-sentinel; worker consumes from a redis:// broker"
    ]
    assert broker_mismatch(spec.model_copy(update={"broker": "rabbitmq"}), {"broker_scheme": "amqp"}) == []
