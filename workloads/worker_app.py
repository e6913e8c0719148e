"""Entry point for ``celery -A workloads.worker_app worker``: builds the run's app from the environment."""
from workloads.app import create_app
from workloads.spec import RunSpec, host_from_env, run_dir_from_env

app = create_app(RunSpec.load(run_dir_from_env()), run_dir_from_env(), host_from_env())
