"""Promotion under races and odd states: real SQLite registries, real `wattgpu promote` processes.

Versions here point at an empty folder: the registry and the gate read tags and aliases only,
so no model needs training.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time

import mlflow
import pytest
from click.testing import CliRunner
from mlflow.tracking import MlflowClient

from wattgpu.cli import cli
from wattgpu.errors import ConfigError
from wattgpu.lifecycle import promotion_lock, promotion_log, registry, tracking
from wattgpu.lifecycle.gate import TOLERANCE_PP

pytestmark = pytest.mark.slow
NAME = "wattgpu-power"


def make_registry(
    tmp_path, mdapes: dict[int, float | None], data: dict[int, str] | None = None, uri: str = ""
) -> MlflowClient:
    """Versions 1..n of wattgpu-power with these LOGO MdAPEs (None: no wattgpu tags).

    Each figure was measured on data ``data[version]`` (default: all on data ``d1``). The store:
    ``uri``, by default an SQLite file in ``tmp_path``.
    """
    uri = uri or f"sqlite:///{tmp_path / 'mlflow.db'}"
    tracking.configure(uri)
    client = MlflowClient(uri)
    client.create_registered_model(NAME)
    (tmp_path / "model").mkdir(exist_ok=True)
    # a tracking server refuses a local folder as a source that belongs to no run
    source = "s3://wattgpu-tests/model" if uri.startswith("http") else str(tmp_path / "model")
    for version in sorted(mdapes):
        mdape = mdapes[version]
        measured_on = (data or {}).get(version, "d1")
        tags = {} if mdape is None else {registry.GATE_TAG: str(mdape)}
        if mdape is not None:
            tags |= {registry.GATE_DATA_TAG: measured_on, registry.GATE_ROWS_TAG: "120"}
        client.create_model_version(NAME, source=source, tags=tags)
        client.set_registered_model_alias(NAME, registry.CHALLENGER, str(version))
    return client


def state(client: MlflowClient) -> dict[int, tuple[str, str, str, str]]:
    """Per version: aliases, stage, production decision record, archived tag."""
    found = {}
    for listed in client.search_model_versions(f"name='{NAME}'"):
        # search results carry no aliases: read each version
        v = client.get_model_version(NAME, listed.version)
        found[int(v.version)] = (
            ",".join(sorted(v.aliases)),
            v.current_stage,
            v.tags.get("wattgpu.promotion.production", ""),
            v.tags.get(registry.ARCHIVED_TAG, ""),
        )
    return found


def promote_together(
    tmp_path, versions: list[int], uri: str = ""
) -> list[subprocess.CompletedProcess]:
    """Start one `wattgpu promote` process per version at once; wait for all."""
    env = {**os.environ, "MLFLOW_TRACKING_URI": uri or f"sqlite:///{tmp_path / 'mlflow.db'}"}
    command = [
        sys.executable,
        "-m",
        "wattgpu",
        "promote",
        "--target",
        "power",
        "--to",
        "production",
    ]
    procs = [
        subprocess.Popen(
            [*command, "--version", str(v)],
            env=env,
            cwd=tmp_path,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for v in versions
    ]
    done = []
    for proc in procs:
        out, err = proc.communicate(timeout=300)
        done.append(subprocess.CompletedProcess(proc.args, proc.returncode, out, err))
    return done


@pytest.mark.parametrize("round_", range(3))
def test_two_promotions_at_once_end_as_one_order_would(tmp_path, round_):
    two_promotions_at_once(tmp_path)


def two_promotions_at_once(tmp_path, uri: str = "") -> None:
    """Two `wattgpu promote` processes at once end as one of the two orders would."""
    # production v2 at 30 %; v3 (20 %) and v1 (25 %) both beat it but v1 loses to v3 by more
    # than the tolerance, so the two orders end differently and an unserialised pair (both
    # compared with v2) matches neither.
    client = make_registry(tmp_path, {1: 25.0, 2: 30.0, 3: 20.0}, uri=uri)
    registry.promote("power", 2, "production")
    v1, v3 = promote_together(tmp_path, [1, 3], uri=uri)
    assert v3.returncode == 0, v3.stderr
    after = state(client)
    assert after[3][:2] == ("production", "Production")
    tolerance = f"tolerance {TOLERANCE_PP} pp"
    if v1.returncode == 0:  # v1 went first: accepted against v2, then replaced by v3
        assert (
            f"vs production v2 30.000 % on data d1 (120 rows); {tolerance}; replaced v2"
            in (after[1][2])
        )
        assert (
            f"vs production v1 25.000 % on data d1 (120 rows); {tolerance}; replaced v1"
            in (after[3][2])
        )
        assert after[1][1] == "Archived" and after[1][3].startswith("replaced by v3")
        assert after[2][3].startswith("replaced by v1")
    else:  # v3 went first: v1 was compared with v3 and refused, with one line
        assert v1.returncode == 1
        assert v1.stderr.strip() == (
            "Error: refused: wattgpu-power v1 has LOGO MdAPE 25.00 %, worse than production "
            f"v3's 20.00 % on the same data (120 rows, {tolerance}); use --force to promote "
            "anyway"
        )
        assert after[1][2].startswith("refused production") and "vs production v3" in after[1][2]
        assert (
            f"vs production v2 30.000 % on data d1 (120 rows); {tolerance}; replaced v2"
            in (after[3][2])
        )
        assert after[2][3].startswith("replaced by v3") and after[1][3] == ""
    assert after[2][:2] == ("", "Archived")
    # the lock was released and left nothing behind; the promotion log holds its head only
    names = {m.name for m in client.search_registered_models()}
    commits = 3 if v1.returncode == 0 else 2  # v2's, then v3's (and v1's when accepted)
    assert names == {NAME, promotion_log.entry_name(NAME, commits)}
    assert promotion_log.head(client, NAME).state == {"staging": None, "production": 3}


def test_aliases_and_stages_tell_one_story(tmp_path):
    client = make_registry(tmp_path, {1: 30.0, 2: 20.0, 3: 50.0})
    registry.promote("power", 1, "staging")
    assert state(client)[1][:2] == ("staging", "Staging")
    registry.promote("power", 1, "production")
    assert state(client)[1][:2] == ("production", "Production")  # staging and challenger left
    # staging takes a version worse than production, and records the comparison
    staged = registry.promote("power", 3, "staging")
    assert staged.production_mdape == 30.0
    record = client.get_model_version(NAME, "3").tags["wattgpu.promotion.staging"]
    assert record.startswith("accepted staging")
    assert "vs production v1 30.000 % on data d1" in record
    registry.promote("power", 2, "production")
    registry.promote("power", 1, "production", force=True)  # back again, forced
    after = state(client)
    assert after[1][:2] == ("production", "Production") and after[1][3] == ""
    assert after[2][:2] == ("", "Archived") and after[2][3].startswith("replaced by v1")
    assert after[3][:2] == ("staging", "Staging")
    # every alias is on exactly one version and every version has at most one
    aliases = [a for v in after.values() for a in v[0].split(",") if a]
    assert sorted(aliases) == ["production", "staging"]
    with pytest.raises(ConfigError, match="v1 is in production"):
        registry.promote("power", 1, "staging")
    again = registry.promote("power", 1, "production")  # a no-op that says so
    assert again.previous_production is None and state(client) == {
        **after,
        1: (*after[1][:2], state(client)[1][2], ""),
    }
    assert state(client)[1][2].endswith("already in production")


def test_a_version_registered_outside_wattgpu_is_refused_with_one_line(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # MLflow's default experiment keeps artifacts in ./mlruns
    make_registry(tmp_path, {1: 3.0})
    registry.promote("power", 1, "production")
    with mlflow.start_run():
        mlflow.log_text("flavors: {}\n", "model/MLmodel")  # the least MLflow registers
        uri = f"runs:/{mlflow.active_run().info.run_id}/model"
    plain = mlflow.register_model(uri, NAME).version
    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"sqlite:///{tmp_path / 'mlflow.db'}")
    result = CliRunner().invoke(
        cli, ["promote", "--target", "power", "--version", plain, "--to", "staging"]
    )
    assert result.exit_code == 1
    assert result.output.strip() == (
        f"Error: wattgpu-power v{plain} lacks tag wattgpu.logo_mdape (got None): it was not "
        "registered by `wattgpu register`, so the quality gate cannot compare it"
    )


HOLD_THEN_SLEEP = """
import sys, time
from mlflow.tracking import MlflowClient
from wattgpu.lifecycle import promotion_lock
promotion_lock.acquire(MlflowClient(sys.argv[1]), "wattgpu-power", wait_s=5, lease_s=3)
print("held", flush=True)
time.sleep(600)
"""


def test_a_live_lock_makes_others_wait_and_a_dead_holders_lock_is_taken_over(tmp_path):
    client = make_registry(tmp_path, {1: 3.0, 2: 2.0})
    lease = promotion_lock.acquire(client, NAME, wait_s=1, lease_s=30)
    with pytest.raises(promotion_lock.LockBusy, match="another promotion of wattgpu-power"):
        promotion_lock.acquire(client, NAME, wait_s=0.5, lease_s=30)
    promotion_lock.release(client, lease)
    # a holder that dies (SIGKILL) while it holds the lock, with a 3 s lease
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLD_THEN_SLEEP, f"sqlite:///{tmp_path / 'mlflow.db'}"],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert holder.stdout.readline().strip() == "held"
    holder.kill()
    holder.communicate()
    done = registry.promote("power", 2, "production")  # waits out the lease, then takes over
    assert done.version == 2
    dead = promotion_lock.lock_name(NAME)
    names = {m.name for m in client.search_registered_models() if "promotion-lock" in m.name}
    # the dead holder's lock was renamed away (never deleted by its shared name); ours is gone
    assert len(names) == 1 and names.pop().startswith(f"{dead}.gone-")


def test_a_promotion_that_waits_compares_with_the_production_it_replaces(tmp_path):
    client = make_registry(tmp_path, {1: 30.0, 2: 20.0, 3: 25.0})
    registry.promote("power", 1, "production")
    lease = promotion_lock.acquire(client, NAME, wait_s=1, lease_s=30)
    env = {**os.environ, "MLFLOW_TRACKING_URI": f"sqlite:///{tmp_path / 'mlflow.db'}"}
    proc = subprocess.Popen(
        [sys.executable, "-m", "wattgpu", "promote", "--target", "power", "--version", "3"]
        + ["--to", "production"],
        env=env,
        cwd=tmp_path,
        stderr=subprocess.PIPE,
        text=True,
    )
    # the promoter starts (a few seconds to import) and waits for the lock; meanwhile
    # production moves under it
    time.sleep(8)
    assert proc.poll() is None, "the promoter did not wait for the lock"
    # production moves to v2 as a promotion moves it: committed to the log, then the alias
    head = promotion_log.head(client, NAME)
    promotion_log.commit(client, lease, NAME, head, {"staging": None, "production": 2}, {})
    client.set_registered_model_alias(NAME, "production", "2")
    promotion_lock.release(client, lease)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 1, err
    assert "worse than production v2's 20.00 %" in err
    assert str(client.get_model_version_by_alias(NAME, "production").version) == "2"
