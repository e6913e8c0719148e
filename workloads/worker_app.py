"""Entry point for ``celery -A workloads.worker_app worker``: builds the run's app from the environment."""
from workloads.app import create_app
from workloads.spec import RunSpec, host_from_env, run_dir_from_env, worker_client_name

_spec = RunSpec.load(run_dir_from_env())
app = create_app(_spec, run_dir_from_env(), host_from_env())
if _spec.broker == "redis":
    # Named, so the driver can wake this worker's blocking BRPOP when it adds the run's queue
    # (workloads/workerwatch.py); otherwise that BRPOP waits up to 1 s on the hold queue alone.
    app.conf.broker_transport_options = {**(app.conf.broker_transport_options or {}),
                                         "client_name": worker_client_name(_spec.run_id)}
