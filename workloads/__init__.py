"""Code shipped to every host: the Celery app factory, instrumentation, sampler, driver and workloads.

Importing this package has no side effects (no monkey-patching, no broker connection): the
controller imports it to validate workload params; hosts run its entry points
(``python -m cmx.workloads.host.agent``, ``python -m cmx.workloads.host.hostcli ...``).
"""
