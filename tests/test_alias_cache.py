"""The alias cache: kept for a store that has not changed, dropped by any write to it."""

from __future__ import annotations

import os
import time

from wattgpu.lifecycle import alias_cache


def _store(tmp_path, age_s: float = 10.0):
    database = tmp_path / "mlflow.db"
    database.write_bytes(b"x" * 100)
    then = time.time() - age_s
    os.utime(database, (then, then))
    folder = tmp_path / "model"
    folder.mkdir(exist_ok=True)
    return f"sqlite:///{database}", database, str(folder)


def test_an_answer_is_kept_while_the_store_is_unchanged(tmp_path):
    uri, _, folder = _store(tmp_path)
    before = alias_cache.stamp_now(uri)
    alias_cache.remember(uri, "wattgpu-power", "production", (3, folder), before)
    alias_cache.remember(uri, "wattgpu-ttft", "production", (None, ""), before)
    assert alias_cache.lookup(uri, "wattgpu-power", "production") == (3, folder)
    assert alias_cache.lookup(uri, "wattgpu-ttft", "production") == (None, "")
    assert alias_cache.lookup(uri, "wattgpu-itl", "production") is None


def test_any_write_to_the_store_drops_every_answer(tmp_path):
    uri, database, folder = _store(tmp_path)
    before = alias_cache.stamp_now(uri)
    alias_cache.remember(uri, "wattgpu-power", "production", (3, folder), before)
    with database.open("ab") as file:
        file.write(b"y")
    then = time.time() - 10
    os.utime(database, (then, then))
    assert alias_cache.lookup(uri, "wattgpu-power", "production") is None


def test_nothing_is_kept_for_a_store_written_during_the_question_or_just_now(tmp_path):
    uri, database, folder = _store(tmp_path)
    before = alias_cache.stamp_now(uri)
    then = time.time() - 5
    os.utime(database, (then, then))  # written while MLflow was being asked
    alias_cache.remember(uri, "wattgpu-power", "production", (3, folder), before)
    assert alias_cache.lookup(uri, "wattgpu-power", "production") is None
    uri, _, folder = _store(tmp_path, age_s=0.0)  # modified within the clock's tick
    assert alias_cache.stamp_now(uri) is None


def test_a_journal_with_content_or_a_missing_folder_is_never_trusted(tmp_path):
    uri, database, folder = _store(tmp_path)
    before = alias_cache.stamp_now(uri)
    alias_cache.remember(uri, "wattgpu-power", "production", (3, folder), before)
    journal = database.with_name(database.name + "-journal")
    journal.write_bytes(b"z")
    assert alias_cache.lookup(uri, "wattgpu-power", "production") is None
    journal.unlink()
    os.rmdir(folder)
    assert alias_cache.lookup(uri, "wattgpu-power", "production") is None


def test_no_cache_for_other_stores(tmp_path):
    assert alias_cache.stamp_now("postgresql+psycopg2://u@h/db") is None
    assert alias_cache.lookup("http://localhost:5000", "wattgpu-power", "production") is None
