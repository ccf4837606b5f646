"""The team set-up on one machine: real PostgreSQL, a real `mlflow server`, two tuning workers.

The PostgreSQL server is a throwaway cluster started here (as the `postgres` user, in a temp
dir, on a free port); the workers are real `wattgpu tune` processes sharing one Optuna study,
first with the MLflow store as a database URI, then through a tracking server over HTTP with
PostgreSQL behind it and artifacts served by it, as docs/operations.md "Growing past one
machine" says.
"""

from __future__ import annotations

import functools
import json
import os
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from contextlib import contextmanager
from pathlib import Path

import mlflow
import optuna
import pytest
import sqlalchemy
from conftest import REPO
from mlflow.tracking import MlflowClient

from wattgpu.config import MLFLOW_JOB_RUNNERS, SHIPPED_DATA_DIR
from wattgpu.lifecycle import promotion_log, registry
from wattgpu.lifecycle.gate import TOLERANCE_PP
from wattgpu.modeling.physical.synthetic import synthesize

pytestmark = pytest.mark.slow

GPUS = ["NVIDIA Tesla T4", "NVIDIA L4", "NVIDIA H100 SXM5", "NVIDIA A10G"]


def pg_binary(name: str) -> str | None:
    found = shutil.which(name)
    if found:
        return found
    candidates = sorted(Path("/usr/lib/postgresql").glob(f"*/bin/{name}"))
    return str(candidates[-1]) if candidates else None


@pytest.fixture(scope="module")
def postgres():
    initdb, pg_ctl = pg_binary("initdb"), pg_binary("pg_ctl")
    if not initdb or os.geteuid() != 0:
        if os.environ.get("CI") == "true":
            pytest.fail(
                "CI: PostgreSQL (initdb, pg_ctl) must be installed by .ci/run, tests run as root"
            )
        pytest.skip("PostgreSQL server binaries not installed")
    # pytest's own temp root is private to root; the server runs as `postgres`
    root = Path(tempfile.mkdtemp(prefix="wattgpu-pg-"))
    root.chmod(0o777)
    data, sock = root / "data", root / "sock"
    sock.mkdir()
    sock.chmod(0o777)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    as_postgres = ["su", "postgres", "-s", "/bin/sh", "-c"]
    subprocess.run(
        [*as_postgres, f"{initdb} -D {data} -A trust -U postgres >/dev/null"], check=True
    )
    subprocess.run(
        [
            *as_postgres,
            f"{pg_ctl} -D {data} -o '-p {port} -k {sock} -h 127.0.0.1' -l {root}/log "
            "-w start >/dev/null",
        ],
        check=True,
    )
    yield f"postgresql+psycopg2://postgres@127.0.0.1:{port}/postgres"
    subprocess.run([*as_postgres, f"{pg_ctl} -D {data} -m fast -w stop >/dev/null"], check=False)
    shutil.rmtree(root, ignore_errors=True)


def test_two_workers_share_one_postgres_study(postgres, tmp_path, catalog):
    rows = synthesize(catalog, seed=4)
    data = tmp_path / "small.csv"
    rows[rows["gpu"].isin(GPUS)].to_csv(data, index=False)
    # Create the study and the MLflow store (and so their schemas) once before the workers
    # start, as docs/operations.md says: two first-time creators race on the tables.
    optuna.create_study(study_name="shared", storage=postgres, direction="minimize")
    # MLflow's store lives in the same server (its own database), as a team's tracking server
    # would have it: two processes writing one SQLite file lock each other out under load.
    engine = sqlalchemy.create_engine(postgres, isolation_level="AUTOCOMMIT")
    with engine.connect() as connection:
        connection.execute(sqlalchemy.text("CREATE DATABASE mlflow"))
    engine.dispose()
    tracking_uri = postgres.rsplit("/", 1)[0] + "/mlflow"
    MlflowClient(tracking_uri).search_experiments()
    env = {
        **os.environ,
        "MLFLOW_TRACKING_URI": tracking_uri,
        "WATTGPU_DATA_DIR": str(SHIPPED_DATA_DIR),
    }
    command = [sys.executable, "-m", "wattgpu", "tune", "--target", "power", "--trials", "4"]
    command += ["--storage", postgres, "--study", "shared", "--data", str(data)]
    pipe = {"stdout": subprocess.PIPE, "stderr": subprocess.STDOUT, "text": True}
    workers = [subprocess.Popen(command, env=env, cwd=tmp_path, **pipe) for _ in range(2)]
    outputs = [w.communicate(timeout=600)[0] for w in workers]
    assert all(w.returncode == 0 for w in workers), outputs
    study = optuna.load_study(study_name="shared", storage=postgres)
    finished = (optuna.trial.TrialState.COMPLETE, optuna.trial.TrialState.PRUNED)
    done = [t for t in study.trials if t.state in finished]
    # each worker stops once the study holds 4 finished trials (complete, or pruned: stopped
    # early, worse than the others); running at once, both may finish a trial in flight, so
    # the study holds between 4 and 5
    assert 4 <= len(done) <= 5
    assert len({t.number for t in done}) == len(done)
    assert any(t.state == optuna.trial.TrialState.COMPLETE for t in done)
    # both workers logged a parent run, with their trials nested in it, to the shared store
    mlflow.set_tracking_uri(tracking_uri)
    runs = mlflow.search_runs(search_all_experiments=True)
    parents = runs[runs["tags.wattgpu.kind"] == "tuning"]
    assert len(parents) == 2 and set(parents["status"]) == {"FINISHED"}
    assert runs["tags.mlflow.parentRunId"].isin(parents["run_id"]).sum() >= 4


def test_promotions_on_a_postgres_uri(postgres, tmp_path):
    """The registry lifecycle tests with the store as a PostgreSQL URI (no tracking server)."""
    from test_promotion_fencing import stall_rounds_on
    from test_registry import two_promotions_at_once

    engine = sqlalchemy.create_engine(postgres, isolation_level="AUTOCOMMIT")
    with engine.connect() as connection:
        for database in ("registry_race", "registry_stall"):
            connection.execute(sqlalchemy.text(f"CREATE DATABASE {database}"))
    engine.dispose()
    base = postgres.rsplit("/", 1)[0]
    (tmp_path / "race").mkdir()
    (tmp_path / "stall").mkdir()
    two_promotions_at_once(tmp_path / "race", uri=f"{base}/registry_race")
    stall_rounds_on(f"{base}/registry_stall", tmp_path / "stall")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for(url: str, proc: subprocess.Popen, seconds: float = 120) -> None:
    """Wait until ``url`` answers 200, failing early if ``proc`` died."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        assert proc.poll() is None, f"{proc.args[:3]} exited with {proc.returncode}"
        try:
            with urllib.request.urlopen(url, timeout=2) as response:
                if response.status == 200:
                    return
        except (urllib.error.URLError, ConnectionError, TimeoutError):
            pass
        time.sleep(0.5)
    raise AssertionError(f"{url} did not answer within {seconds} s")


@contextmanager
def background(command: list[str], env: dict[str, str], cwd: Path, log: Path):
    """A server process in its own session, stopped (with whatever it spawned) afterwards."""
    with log.open("w") as out:
        proc = subprocess.Popen(
            command, env=env, cwd=cwd, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
        )
        try:
            yield proc
        finally:
            os.killpg(proc.pid, signal.SIGTERM)  # the group this test started, by its id
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()


# MLflow's server jobs, which WattGPU never uses, off: no job runner processes beside the server
WITHOUT_JOBS = ("env", f"{MLFLOW_JOB_RUNNERS}=false")


def team_commands(**at: str) -> dict[str, list[str]]:
    """The team set-up of docs/operations.md as argument lists; ``at`` fills in where things are."""
    return {
        "server": [*WITHOUT_JOBS, "mlflow", "server", "--backend-store-uri", at["backend"]]
        + ["--serve-artifacts", "--artifacts-destination", at["artifacts"]]
        + ["--host", at["host"], "--port", at["port"]],
        "study": ["optuna", "create-study", "--storage", at["studies"], "--study-name"]
        + ["power-v1", "--direction", "minimize"],
        "tune": ["wattgpu", "tune", "--target", "power", "--trials", at["trials"], "--storage"]
        + [at["studies"], "--study", "power-v1"],
        "register": ["wattgpu", "register", "--target", "power"],
        "promote": [
            "wattgpu",
            "promote",
            "--target",
            "power",
            "--version",
            "1",
            "--to",
            "production",
        ],
        "predict": ["wattgpu", "predict", "--gpu", "L4", "--model", "Qwen/Qwen2.5-7B-Instruct"]
        + ["--scenario", "offline", "--target", "power", "--format", "json"],
        "serve": ["mlflow", "models", "serve", "-m", "models:/wattgpu-power@production"]
        + ["--env-manager", "local", "-p", at["serve_port"]],
    }


def shape(words: list[str]) -> list[str]:
    """A command without the values that differ between machines: programs, options, names."""
    kept, skip = [], False
    for word in words:
        if skip:
            skip = False
            continue
        kept.append(word)
        skip = word in VARYING
    return kept


VARYING = {"--backend-store-uri", "--artifacts-destination", "--host", "--port", "--storage"}
VARYING |= {"--trials", "-p"}


def test_readme_team_setup_is_what_the_team_test_runs():
    readme = (REPO / "docs" / "operations.md").read_text()
    section = readme.split("## Growing past one machine", 1)[1].split("\n## ", 1)[0]
    block = section.split("```bash\n", 1)[1].split("```", 1)[0]
    lines = [line for line in block.splitlines() if line and not line.startswith("#")]
    written = [shlex.split(line) for line in lines]
    assert written[0] == ["pip", "install", "-e", ".[postgres]"]
    assert written[3][:2] == ["export", "MLFLOW_TRACKING_URI=http://mlflow.internal:5000"]
    at = dict.fromkeys(("backend", "artifacts", "host", "port", "studies", "trials"), "x")
    tested = team_commands(**at, serve_port="x")
    ran = [tested[k] for k in ("server", "study", "tune", "register", "promote", "predict")]
    assert [shape(w) for w in written[1:3] + written[4:]] == [
        shape(c) for c in [*ran, tested["serve"]]
    ]
    assert "`createdb mlflow`" in section  # the databases the server and the study live in


def test_team_setup_through_a_real_tracking_server(postgres, tmp_path, catalog):
    """docs/operations.md "Growing past one machine", command for command, on one machine."""
    rows = synthesize(catalog, seed=6)
    data = tmp_path / "small.csv"
    rows[rows["gpu"].isin(GPUS)].to_csv(data, index=False)
    host_port = postgres.split("@", 1)[1].split("/", 1)[0]
    host, port = host_port.split(":")
    # the first test's MLflow store is database "mlflow"; this server gets its own
    for database in ("mlflow_team", "wattgpu"):
        subprocess.run(
            [pg_binary("createdb"), "-h", host, "-p", port, "-U", "postgres", database], check=True
        )
    backend = f"postgresql+psycopg2://postgres@{host_port}/mlflow_team"
    commands = team_commands(
        backend=backend,
        artifacts=str(tmp_path / "artifacts"),
        host="127.0.0.1",
        port=str(free_port()),
        studies=f"postgresql+psycopg2://postgres@{host_port}/wattgpu",
        trials="2",
        serve_port=str(free_port()),
    )
    server_url = f"http://127.0.0.1:{commands['server'][-1]}"
    bin_dir = Path(sys.executable).parent
    env = {
        **os.environ,
        "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}",
        "MLFLOW_DISABLE_TELEMETRY": "true",
        "WATTGPU_DATA_DIR": str(SHIPPED_DATA_DIR),
    }
    with background(commands["server"], env, tmp_path, tmp_path / "server.log") as server:
        wait_for(f"{server_url}/health", server)
        run = functools.partial(
            subprocess.run, env=env, cwd=tmp_path, capture_output=True, text=True, timeout=600
        )
        created = run(commands["study"])
        assert created.returncode == 0, created.stderr
        env["MLFLOW_TRACKING_URI"] = server_url
        # the documented worker command, on generated rows of four GPUs to stay small
        tune = [*commands["tune"], "--data", str(data)]
        pipe = {"stdout": subprocess.PIPE, "stderr": subprocess.STDOUT, "text": True}
        workers = [subprocess.Popen(tune, env=env, cwd=tmp_path, **pipe) for _ in range(2)]
        outputs = [w.communicate(timeout=600)[0] for w in workers]
        assert all(w.returncode == 0 for w in workers), [o[-2000:] for o in outputs]
        for name in ("register", "promote"):
            done = run(commands[name])
            assert done.returncode == 0, done.stderr[-2000:]
        predicted = run(commands["predict"])
        assert predicted.returncode == 0, predicted.stderr[-2000:]
        assert 10 < json.loads(predicted.stdout)[0]["prediction"] <= 72 * 1.5
        serve_port = commands["serve"][-1]
        with background(commands["serve"], env, tmp_path, tmp_path / "serve.log") as served:
            wait_for(f"http://127.0.0.1:{serve_port}/ping", served)
            query = {"gpu": "NVIDIA L4", "model": "Qwen/Qwen2.5-7B-Instruct"}
            query |= {"scenario": "offline"}
            body = json.dumps({"dataframe_records": [query]}).encode()
            request = urllib.request.Request(
                f"http://127.0.0.1:{serve_port}/invocations",
                body,
                {"Content-Type": "application/json"},
            )
            with urllib.request.urlopen(request, timeout=60) as response:
                answer = json.loads(response.read())["predictions"][0]
        assert answer["prediction"] == pytest.approx(json.loads(predicted.stdout)[0]["prediction"])
        promote_two_at_once_through(server_url, env, run)
        # MLflow's server jobs are off: no job runner process in the server's group
        runners = subprocess.run(["pgrep", "-g", str(server.pid), "-f", "huey"], text=True)
        assert runners.returncode == 1, "the server started MLflow's job runners"
    # everything went through the server: runs and model in its PostgreSQL store, artifacts
    # in its artifact folder, the trials in the shared study
    study = optuna.load_study(study_name="power-v1", storage=commands["study"][3])
    assert sum(t.state == optuna.trial.TrialState.COMPLETE for t in study.trials) >= 2
    client = MlflowClient(backend)  # the server's store, read directly
    assert str(client.get_model_version_by_alias("wattgpu-power", "production").version) == "3"
    assert any((tmp_path / "artifacts").rglob("MLmodel"))
    assert not (tmp_path / "mlruns").exists() and not (tmp_path / "mlflow.db").exists()


def promote_two_at_once_through(server_url: str, env: dict[str, str], run) -> None:
    """Two `wattgpu promote` processes at once over HTTP end as one of the two orders would."""
    client = MlflowClient(server_url)
    for _ in range(2):  # v2 and v3, from the latest run; their gate numbers set below
        assert run(["wattgpu", "register", "--target", "power"]).returncode == 0
    base = float(client.get_model_version("wattgpu-power", "1").tags[registry.GATE_TAG])
    # v3 beats v2 beats production v1, each by more than the tolerance: v2 first is accepted
    # and then replaced by v3; v3 first refuses v2. Unserialised, both would be judged against v1.
    step = 1.5 * TOLERANCE_PP
    client.set_model_version_tag("wattgpu-power", "2", registry.GATE_TAG, str(base - step))
    client.set_model_version_tag("wattgpu-power", "3", registry.GATE_TAG, str(base - 2 * step))
    command = ["wattgpu", "promote", "--target", "power", "--to", "production", "--version"]
    pipe = {"stdout": subprocess.PIPE, "stderr": subprocess.PIPE, "text": True}
    procs = [subprocess.Popen([*command, v], env=env, **pipe) for v in ("2", "3")]
    results = [(p.communicate(timeout=300), p.returncode) for p in procs]
    assert results[1][1] == 0, results
    records = {
        v: client.get_model_version("wattgpu-power", v).tags["wattgpu.promotion.production"]
        for v in ("2", "3")
    }
    assert str(client.get_model_version_by_alias("wattgpu-power", "production").version) == "3"
    if results[0][1] == 0:
        assert "vs production v1" in records["2"] and "replaced v1" in records["2"]
        assert "vs production v2" in records["3"] and "replaced v2" in records["3"]
    else:
        assert results[0][0][1].strip().startswith("Error: refused: wattgpu-power v2")
        assert records["2"].startswith("refused") and "vs production v3" in records["2"]
        assert "vs production v1" in records["3"] and "replaced v1" in records["3"]
    # the lock was released; the promotion log holds its head only, which says v3
    names = {m.name for m in client.search_registered_models()}
    assert {n for n in names if ".promotions." not in n} == {"wattgpu-power"}
    assert promotion_log.head(client, "wattgpu-power").state["production"] == 3
