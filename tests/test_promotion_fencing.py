"""The promotion lock when a holder stalls or clocks disagree, and register racing a promotion.

Real SQLite registries and real processes: a holder is stopped with SIGSTOP (or slowed by a
sleep wrapped around one registry read) while another promotion or registration runs; a waiter
runs in a process whose wall clock is shifted by a minute. Versions point at an empty folder,
as in ``test_registry``: the lock and the gate read tags and aliases only.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import mlflow
import pytest
from test_registry import NAME, make_registry, state

from wattgpu.lifecycle import promotion_lock, registry, tracking

pytestmark = pytest.mark.slow

# A `wattgpu promote` whose first read of the production alias under the lock is followed by a
# stall: SIGSTOP of itself (STALL=stop) or a sleep (STALL=seconds) on reading the aliases.
PROMOTER = """
import os, signal, sys, time
from mlflow.tracking import MlflowClient
from wattgpu.lifecycle import promotion_lock, registry, tracking

uri, version, stall, lease = sys.argv[1], int(sys.argv[2]), sys.argv[3], float(sys.argv[4])
tracking.configure(uri)
promotion_lock.LEASE_S = lease
by_alias, registered = MlflowClient.get_model_version_by_alias, MlflowClient.get_registered_model
done = []

def read_production(self, name, alias):
    found = by_alias(self, name, alias)
    if stall == "stop" and alias == "production" and not done:
        done.append(1)
        print("read production", flush=True)
        os.kill(os.getpid(), signal.SIGSTOP)
    return found

def read_aliases(self, name):
    found = registered(self, name)
    if stall != "stop" and name == "wattgpu-power" and not done:
        done.append(1)
        print("read aliases", flush=True)
        time.sleep(float(stall))
    return found

MlflowClient.get_model_version_by_alias = read_production
MlflowClient.get_registered_model = read_aliases
try:
    registry.promote("power", version, "production")
except Exception as exc:
    print(f"{type(exc).__name__}: {exc}", flush=True)
    sys.exit(1)
print("promoted", flush=True)
"""


def start_promoter(
    tmp_path, version: int, stall: str, lease: float, uri: str = ""
) -> subprocess.Popen:
    uri = uri or f"sqlite:///{tmp_path / 'mlflow.db'}"
    return subprocess.Popen(
        [sys.executable, "-c", PROMOTER, uri, str(version), stall, str(lease)],
        stdout=subprocess.PIPE,
        text=True,
    )


def wait_stopped(pid: int) -> None:
    """Wait until process ``pid`` is in state T (stopped)."""
    for _ in range(200):
        with open(f"/proc/{pid}/stat") as stat:
            if stat.read().rsplit(")", 1)[1].split()[0] == "T":
                return
        time.sleep(0.05)
    raise AssertionError(f"process {pid} did not stop")


def test_a_stalled_holders_writes_are_refused_and_the_end_state_is_one_order(tmp_path):
    stalled_holder(tmp_path)


def stalled_holder(tmp_path, uri: str = "") -> None:
    """A holder stopped past its lease while a second promotion runs: only the second lands."""
    # production v1 at 3 %; v2 (2 %) and v3 (2.5 %) both beat it, and v2 would beat v3.
    client = make_registry(tmp_path, {1: 3.0, 2: 2.0, 3: 2.5}, uri=uri)
    registry.promote("power", 1, "production")
    # A takes the lock (a 6 s lease), reads production (v1), and is stopped before any write.
    stalled = start_promoter(tmp_path, 2, "stop", lease=6, uri=uri)
    assert stalled.stdout.readline().strip() == "read production"
    wait_stopped(stalled.pid)
    # B waits until it has seen A's lock for a whole lease, takes it over, and promotes v3.
    done = registry.promote("power", 3, "production")
    assert done.previous_production == 1 and done.production_mdape == 3.0
    os.kill(stalled.pid, signal.SIGCONT)
    out, _ = stalled.communicate(timeout=120)
    # A wakes up, decides v2 beats v1, and its first write is refused by the fence.
    assert stalled.returncode == 1, out
    assert out.strip().startswith("LockBusy: lost the promotion lock"), out
    after = state(client)
    # Exactly B's order: v3 replaced v1; A moved nothing and recorded no acceptance.
    assert after[3][:2] == ("production", "Production")
    assert after[3][2].endswith(
        "vs production v1 3.000 % on data d1 (120 rows); tolerance 0.1 pp; replaced v1"
    )
    assert after[1][:2] == ("", "Archived") and after[1][3].startswith("replaced by v3")
    assert after[2][:2] == ("", "None")
    assert after[2][2].startswith("timed out production at ") and "accepted" not in after[2][2]
    names = {m.name for m in client.search_registered_models()} - {NAME}
    lock = promotion_lock.lock_name(NAME)
    # B released its lock; the one taken from A stays as A's tombstone
    assert len(names) == 1 and names.pop().startswith(f"{lock}.gone-")


def test_a_stalled_holder_through_a_tracking_server(tmp_path):
    """The same, every call over HTTP to a real `mlflow server` (with MLflow's REST retries)."""
    from test_postgres_workers import background, free_port, wait_for

    port = free_port()
    server = ["mlflow", "server", "--backend-store-uri", f"sqlite:///{tmp_path / 'server.db'}"]
    server += ["--default-artifact-root", str(tmp_path / "artifacts"), "--host", "127.0.0.1"]
    server += ["--workers", "1"]
    bin_dir = os.path.dirname(sys.executable)
    env = {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}"}
    with background([*server, "--port", str(port)], env, tmp_path, tmp_path / "server.log") as proc:
        wait_for(f"http://127.0.0.1:{port}/health", proc, seconds=300)
        stalled_holder(tmp_path, uri=f"http://127.0.0.1:{port}")


def test_a_promotion_whose_lease_runs_out_records_that_and_moves_nothing(tmp_path, monkeypatch):
    client = make_registry(tmp_path, {1: 3.0, 2: 2.0})
    registry.promote("power", 1, "production")
    # a lease shorter than the fence's margin: the first write of the move is already refused
    monkeypatch.setattr(promotion_lock, "LEASE_S", promotion_lock.MARGIN_S - 1)
    with pytest.raises(promotion_lock.LockBusy, match="lost the promotion lock: its lease ran out"):
        registry.promote("power", 2, "production")
    after = state(client)
    assert after[1][:2] == ("production", "Production")
    assert after[2][:2] == ("challenger", "None")
    assert after[2][2].startswith("timed out production at ") and "accepted" not in after[2][2]


# A waiter whose wall clock is off by a minute (argv[2] seconds) against a live lock (of
# wattgpu-power, lease 120 s) and a dead one (of wattgpu-itl, lease 2 s, never released).
SKEWED_WAITER = """
import sys, time
from mlflow.tracking import MlflowClient
from wattgpu.lifecycle import promotion_lock

real = time.time
time.time = lambda: real() + float(sys.argv[2])
client = MlflowClient(sys.argv[1])
try:
    promotion_lock.acquire(client, "wattgpu-power", wait_s=4)
    print("took the live lock")
except promotion_lock.LockBusy:
    print("live lock: busy")
promotion_lock.acquire(client, "wattgpu-itl", wait_s=20)
print("dead lock: taken over")
"""


@pytest.mark.parametrize("skew_s", [60, -60])
def test_a_waiter_with_a_skewed_clock_cannot_take_a_live_lock(tmp_path, skew_s):
    client = make_registry(tmp_path, {1: 3.0})
    live = promotion_lock.acquire(client, NAME, wait_s=1, lease_s=120)
    promotion_lock.acquire(client, "wattgpu-itl", wait_s=1, lease_s=2)  # its holder "dies"
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    done = subprocess.run(
        [sys.executable, "-c", SKEWED_WAITER, uri, str(skew_s)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.splitlines() == ["live lock: busy", "dead lock: taken over"]
    # the live lock is still ours, untouched
    promotion_lock.fence(client, live)
    promotion_lock.release(client, live)


OOF = "gpu,model,scenario,true,pred\n" + "".join(
    f"G{i % 2},M,offline,100,{p}\n" for i, p in enumerate([101, 98, 104, 100])
)


def fake_run(tmp_path, data_hash: str = "d1", oof: str = OOF) -> str:
    """A finished power tuning run with a (stub) model, a LOGO evaluation and a data hash."""
    tags = {"wattgpu.target": "power", "wattgpu.kind": "tuning", "wattgpu.data_hash": data_hash}
    with mlflow.start_run(experiment_id=tracking.experiment_id("power"), tags=tags) as run:
        mlflow.log_text("flavors: {}\n", "model/MLmodel")  # the least MLflow registers
        mlflow.log_text(oof, registry.LOGO_OOF_CSV)
        mlflow.set_tag("wattgpu.model_uri", f"runs:/{run.info.run_id}/model")
    return run.info.run_id


def test_a_register_racing_a_promotion_keeps_its_alias(tmp_path):
    client = make_registry(tmp_path, {1: 3.0, 2: 2.0})  # challenger: v2
    registry.promote("power", 1, "production")
    run_id = fake_run(tmp_path)
    # the promoter of v2 reads the aliases (v2: challenger, production) to tidy them, then
    # sleeps 6 s before it takes v2's challenger alias away by name
    slow = start_promoter(tmp_path, 2, "6", lease=30)
    assert slow.stdout.readline().strip() == "read aliases"
    version = registry.register("power", run_id)  # waits for the promotion's lock
    out, _ = slow.communicate(timeout=120)
    assert slow.returncode == 0 and out.strip() == "promoted", out
    assert version == 3
    after = state(client)
    assert after[3][0] == "challenger" and after[2][:2] == ("production", "Production")
    tags = client.get_model_version(NAME, "3").tags
    # |101-100|, |98-100|, |104-100|, |100-100| over 100: 1, 2, 4, 0 %; the median is 1.5 %
    assert tags[registry.GATE_TAG] == "1.5"
    assert tags[registry.GATE_DATA_TAG] == "d1" and tags[registry.GATE_ROWS_TAG] == "4"
