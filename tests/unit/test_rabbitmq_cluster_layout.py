"""Where a RabbitMQ cluster's nodes run (workloads/servers/rabbitmq_cluster.py), the URL its clients
get, and which inventory URLs serve it (its server's ``takes_url``)."""

from pathlib import Path

from cmx.engine.hosts.inventory import Inventory
from cmx.workloads.servers import rabbitmq_cluster as cluster
from cmx.workloads.servers import registry as servers
from cmx.workloads.servers.rabbitmq_cluster import GroupHost
from cmx.workloads.vocab import kinds


def test_one_host_runs_three_nodes_on_ports_and_names_of_their_own():
    nodes = cluster.layout([GroupHost("localhost", "127.0.0.1", {})])
    got = [(n.index, n.name, n.port, n.management_port, n.dist_port, n.ctl_port_min, n.ctl_port_max) for n in nodes]
    assert got == [
        (1, "cmx-localhost-5681@localhost", 5681, 15681, 25681, 35681, 35690),
        (2, "cmx-localhost-5682@localhost", 5682, 15682, 25682, 35691, 35700),
        (3, "cmx-localhost-5683@localhost", 5683, 15683, 25683, 35701, 35710),
    ]
    assert len({n.dir for n in nodes}) == 3 and not any(n.longname for n in nodes)
    assert cluster.url(nodes, "pw") == (
        "amqp://cmx:pw@127.0.0.1:5681//;amqp://cmx:pw@127.0.0.1:5682//;amqp://cmx:pw@127.0.0.1:5683//"
    )


def test_three_hosts_run_one_node_each_by_address_and_the_count_comes_from_the_inventory():
    hosts = [
        GroupHost(h, f"10.0.0.{i}", {"rabbitmq_cluster_nodes": 4} if i == 1 else {}) for i, h in enumerate("abc", 1)
    ]
    nodes = cluster.layout(hosts)
    assert [(n.host, n.name, n.port) for n in nodes] == [
        ("a", "cmx-a-5681@10.0.0.1", 5681),
        ("b", "cmx-b-5681@10.0.0.2", 5681),
        ("c", "cmx-c-5681@10.0.0.3", 5681),
        ("a", "cmx-a-5682@10.0.0.1", 5682),
    ]
    assert all(n.longname for n in nodes)
    env = cluster.node_env(nodes[0], "pw")
    assert env["RABBITMQ_USE_LONGNAME"] == "true" and env["RABBITMQ_ERLANG_COOKIE"] == cluster.cookie("pw")
    # reached from other hosts: no host rabbitmq-env.conf binding epmd to loopback (seen on this machine)
    assert env["RABBITMQ_CONF_ENV_FILE"] == "/dev/null"
    assert "RABBITMQ_CONF_ENV_FILE" not in cluster.node_env(cluster.layout(hosts[:1])[0], "pw")
    assert cluster.password_of(cluster.url(nodes, "p%40ss")) == "p@ss"


def test_a_cluster_takes_only_a_list_of_node_urls_from_the_inventory():
    single, listed = "amqp://guest:guest@127.0.0.1:5672//", "amqp://u:p@a:5672//;amqp://u:p@b:5672//"
    assert servers.takes_url("broker", "rabbitmq", single) and servers.takes_url("broker", "rabbitmq", listed)
    assert not servers.takes_url("broker", "rabbitmq-cluster", single)
    assert servers.takes_url("broker", "rabbitmq-cluster", listed)
    # The built-in inventory gives a single node: the sweep provisions its own cluster beside it.
    inv = Inventory(
        path=Path("inv.yml"),
        groups={"brokers": ("localhost",), "workers": ("w",), "drivers": ("w",)},
        hostvars={"localhost": {"broker_url": [single], "rabbitmq_cluster_password": "pw"}},
    )
    assert inv.services_to_provision({"rabbitmq-cluster", "rabbitmq"}, set()) == {"rabbitmq_cluster": ["localhost"]}
    assert inv.broker_url("rabbitmq") == single
    assert inv.broker_url("rabbitmq-cluster").count(";") == 2
    assert servers.get("rabbitmq_cluster").secrets(inv) == {
        cluster.API_ENV: ";".join(f"http://cmx:pw@127.0.0.1:{p}" for p in (15681, 15682, 15683))
    }
    given = Inventory(
        path=Path("inv.yml"),
        groups={"brokers": ("localhost",), "workers": ("w",), "drivers": ("w",)},
        hostvars={"localhost": {"broker_url": [listed], "rabbitmq_cluster_password": "pw"}},
    )
    assert given.services_to_provision({"rabbitmq-cluster"}, set()) == {}
    assert given.broker_url("rabbitmq-cluster") == listed
    assert servers.get("rabbitmq_cluster").secrets(given) == {cluster.API_ENV: ""}  # a user's: no API of ours


def test_queue_types_reach_the_run_queues_arguments_and_are_refused_where_the_broker_has_none():
    assert kinds.queue_type_arguments("rabbitmq", "classic") == {}
    assert kinds.queue_type_arguments("rabbitmq-cluster", "quorum", 5) == {
        "x-queue-type": "quorum",
        "x-delivery-limit": 5,
    }
    assert kinds.queue_type_arguments("rabbitmq-quorum", "classic") == {"x-queue-type": "quorum"}  # the alias's own
    assert servers.queue_type_problem("rabbitmq-cluster", "quorum", 5) is None
    assert servers.queue_type_problem("redis", "quorum") == (
        "queue_type quorum: only a broker of rabbitmq, rabbitmq-quorum, rabbitmq-cluster has quorum queues "
        "(this cell's broker is redis)"
    )
    assert servers.queue_type_problem("rabbitmq", "classic", 3) == (
        "delivery_limit 3: x-delivery-limit is a quorum queue's (this cell's queues are classic: set queue_type: "
        "quorum)"
    )


def test_a_run_that_kills_a_node_reaches_that_nodes_host_even_one_that_only_runs_the_node():
    from cmx.engine.run.targets import run_targets

    inv = Inventory(
        path=Path("inv.yml"),
        groups={"brokers": ("a", "b", "c"), "workers": ("b",), "drivers": ("c",)},
        hostvars={
            h: {"ansible_host": f"10.0.0.{i}", "rabbitmq_cluster_password": "pw"} for i, h in enumerate("abc", 1)
        },
    )
    vals = {"broker": "rabbitmq-cluster", "backend": "none", "machines": 1, "drivers": 1}
    assert run_targets(inv, "concurrent_sleep", {**vals, "fault": "none"}).hosts == ("b", "c")
    assert run_targets(inv, "concurrent_sleep", {**vals, "fault": "kill_broker_node@2s"}).hosts == ("b", "c", "a")
    assert run_targets(inv, "concurrent_sleep", {**vals, "fault": "kill_broker_node@2s:2"}).hosts == ("b", "c")
