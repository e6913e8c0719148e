"""The host side of noise (workloads/host/noise.py): /proc parsing, and the sampler's noise.json
telling the run's own CPU from CPU spent outside the run."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from cmx.workloads.host import noise
from cmx.workloads.host.procfs import parse_stat

ROOT = Path(__file__).resolve().parents[2]

PROC_STAT = b"""cpu  13351 7 4065 280058 588 3 132 21 5 0
cpu0 4327 0 1551 142858 80 0 23 6 0 0
cpu1 9024 7 2514 137199 508 3 109 15 5 0
intr 1234 0 0
ctxt 99
btime 1700000000
"""


def test_proc_stat_sums_busy_total_steal_and_counts_cpus():
    t = noise.parse_proc_stat(PROC_STAT)
    assert t.busy == 13351 + 7 + 4065 + 3 + 132  # user nice system irq softirq (guest is in user)
    assert t.total == 13351 + 7 + 4065 + 280058 + 588 + 3 + 132 + 21  # ... + idle iowait steal
    assert t.steal == 21 and t.cpus == 2


def test_proc_stat_of_an_old_kernel_without_steal_and_a_bad_one():
    t = noise.parse_proc_stat(b"cpu  10 0 5 100 1 0 0\ncpu0 10 0 5 100 1 0 0\n")
    assert (t.busy, t.total, t.steal, t.cpus) == (15, 116, 0, 1)
    with pytest.raises(ValueError):
        noise.parse_proc_stat(b"intr 1 2 3\n")


def test_loadavg():
    assert noise.parse_loadavg(b"0.52 0.58 0.59 1/467 12345\n") == 0.52


def test_pressure_lines_with_and_without_full():
    both = b"some avg10=4.45 avg60=1.93 avg300=0.72 total=11231582\nfull avg10=0.00 avg60=0.00 avg300=0.00 total=17\n"
    assert noise.parse_pressure(both) == {"some_us": 11231582, "full_us": 17}
    assert noise.parse_pressure(b"some avg10=0.00 avg60=0.00 avg300=0.00 total=42\n") == {"some_us": 42}


def test_a_missing_pressure_file_is_no_value_not_an_error(tmp_path):
    assert noise.read_pressure(str(tmp_path / "no-such-pressure")) is None


def test_process_stat_gives_its_start_time():
    line = (
        b"42 (a (b) c) S 1 42 42 0 -1 4194560 100 0 0 0 7 3 0 0 20 0 1 0 123456 1000 25 "
        b"18446744073709551615 1 1 0 0 0 0 0 0 0 0 0 17 0 0 0 0 0 0\n"
    )
    stat = parse_stat(line)
    assert (stat.name, stat.cpu_ticks, stat.start_ticks) == ("a (b) c", 10, 123456)


def test_a_process_started_inside_the_window_counts_whole_one_before_from_its_first_reading():
    meter = noise.NoiseMeter()
    meter.start_boot_ticks = 1000
    meter.process(None, 50, start_ticks=900)  # running before the window: a baseline only
    meter.process(50, 80, start_ticks=900)
    meter.process(None, 20, start_ticks=1100)  # started inside it
    assert meter.own_ticks == 30 + 20


SPIN = "import time\nend = time.monotonic() + 30\nwhile time.monotonic() < end: pass\n"
SPIN_WATCHED = (
    "import os, sys, time\nopen(sys.argv[1] + '.tmp', 'w').write(str(os.getpid()))\n"
    "os.replace(sys.argv[1] + '.tmp', sys.argv[1])\n" + SPIN
)


def _spinner_ticks(pid: int) -> int:
    return parse_stat(Path(f"/proc/{pid}/stat").read_bytes()).cpu_ticks


def _sample(run_dir: Path, spinner: str, pidfile: Path, seconds: float = 2.0) -> tuple[dict, int, dict]:
    """Run the sampler watching ``pidfile`` for ``seconds`` beside one spinning process: its
    noise.json, the spinner's CPU ticks over a stretch inside the sampler's window, sampler.json."""
    spin = subprocess.Popen([sys.executable, "-c", spinner, str(pidfile)])
    sampler = None
    try:
        if spinner is SPIN_WATCHED:
            deadline = time.monotonic() + 10
            while not pidfile.exists():
                assert time.monotonic() < deadline, "the spinner wrote no pidfile"
                time.sleep(0.02)
        sampler = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "cmx.workloads.host.sampler",
                "--run-dir",
                str(run_dir),
                "--host",
                "h1",
                "--watch",
                f"worker={pidfile}",
            ],
            cwd=ROOT,
        )
        deadline = time.monotonic() + 15
        while not (run_dir / "sampler.pid").exists():
            assert time.monotonic() < deadline, "the sampler did not start"
            time.sleep(0.02)
        time.sleep(0.3)  # its window has begun
        first = _spinner_ticks(spin.pid)
        time.sleep(seconds)
        spun = _spinner_ticks(spin.pid) - first
        time.sleep(0.3)  # a tick after the stretch
        sampler.send_signal(signal.SIGTERM)
        assert sampler.wait(timeout=15) == 0
    finally:
        spin.kill()
        spin.wait()
        if sampler is not None and sampler.poll() is None:
            sampler.kill()
            sampler.wait()
    return (
        json.loads((run_dir / noise.NOISE_FILE).read_text()),
        spun,
        json.loads((run_dir / "sampler.json").read_text()),
    )


def test_a_spinner_outside_the_run_is_noise_one_inside_is_the_runs_own(tmp_path):
    inside, spun_in, _ = _sample(tmp_path / "inside", SPIN_WATCHED, tmp_path / "spin.pid")
    outside, spun_out, sampler_out = _sample(tmp_path / "outside", SPIN, tmp_path / "nothing.pid")
    for got in (inside, outside):
        assert got["cpus"] >= 1 and got["total_ticks"] > 0 and got["errors"] == []
        assert got["load_readings"] >= 1 and got["load1_mean"] >= 0
        assert set(got["psi"]) <= {"cpu", "memory"}
    # However much CPU the machine gave the spinner (others may share it): watched, all of it is the
    # run's own, and the run's own is part of the host's busy CPU...
    assert spun_in >= 10 and inside["own_ticks"] >= spun_in - 2, (spun_in, inside)
    assert inside["own_ticks"] <= 1.05 * inside["busy_ticks"] + 5
    # ... not watched, the run's own is the sampler alone, and the spinner's CPU is outside the run.
    assert outside["own_ticks"] <= outside["clk_tck"] * sampler_out["cpu_seconds"] + 5
    assert spun_out >= 10 and outside["busy_ticks"] - outside["own_ticks"] >= spun_out - 2, (spun_out, outside)
