"""The run's client names: what a probe counts as the run's, and what it never does."""

from cmx.workloads.vocab.clientname import client_name, parse


def test_names_round_trip_and_others_are_not_the_runs():
    name = client_name("abc-1-x", "worker", "broker")
    assert name == "cmx.abc-1-x.worker.broker"
    assert parse(name, "abc-1-x") == ("worker", "broker")
    assert parse(client_name("abc-1-x", "driver", "backend"), "abc-1-x") == ("driver", "backend")
    for other in (
        None,
        "",
        "celery",
        "cmx.abc-1-y.worker.broker",
        "cmx.abc-1-x.probe.broker",
        "cmx.abc-1-x.worker",
        "cmx.abc-1-x.worker.broker.extra",
        "cmx.abc-1.worker.broker",
    ):
        assert parse(other, "abc-1-x") is None, other
