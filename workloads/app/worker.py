"""Entry point for ``celery -A cmx.workloads.app.worker worker``: builds the run's app from the environment.

The app names its broker connections (workloads/app/factory.py ``name_clients``), so the driver can wake
this worker's blocking BRPOP when it adds the run's queue (workloads/drive/workerwatch.py) and the
connection probes count it; a TERM ends its waits at once (workloads/app/workerstop.py)."""

from cmx.workloads.app import workerstop
from cmx.workloads.app.factory import create_app
from cmx.workloads.runtime.spec import RunSpec, host_from_env, run_dir_from_env

_spec = RunSpec.load(run_dir_from_env())
app = create_app(_spec, run_dir_from_env(), host_from_env())
workerstop.install(app, _spec)  # a TERM stops it now, not at its loop's next wake-up
