"""Downloading the public data sets that the importers read (the only module that goes online).

What each data set fetches, from pinned commits so that the bytes match the shared reference copy:

* ``watt-counts``: ``data/watt_counts_subset.csv`` of github.com/maufadel/wattgpu (branch
  ``main``; about 22 MB).
* ``mlenergy``: from github.com/ml-energy/leaderboard-v2 the 2023 batch-1 CSVs
  (``data/legacy/{A100,A40}_{task}_benchmark.csv``, commit c3af7f3) and the A40 batch-size CSVs
  of the unmerged branch commit d51f433; from github.com/ml-energy/leaderboard the V3 model files
  (``public/data/models/*.json``, commit 0cd52da). 42 small files.
  *Not fetched*: the V2 per-configuration JSONs (``data/llm_text_generation/``, 299 files in
  leaderboard-v2 at c3af7f3: clone that repository to get them) and the V1 server-rate JSONs,
  which no git snapshot holds any more.

* ``argonne``: ``Plots/All_results.csv`` and ``Plots/Fig_16_a_b/power_results.csv`` of
  github.com/argonne-lcf/LLM-Inference-Bench (commit 4211f5d, licence BSD-3-Clause). 2 files.

Files land as ``<dest>/<owner>+<repo>@<short commit>/<path in the repository>``, the layout of
the shared reference copy, which ``wattgpu data import mlenergy|argonne <dest>`` reads.
"""

from __future__ import annotations

import shutil
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

from wattgpu.config import EXTERNAL_DATA_DIR
from wattgpu.errors import DataError

RAW_GITHUB = "https://raw.githubusercontent.com"
WATT_COUNTS_URL = f"{RAW_GITHUB}/maufadel/wattgpu/main/data/watt_counts_subset.csv"
DEFAULT_TIMEOUT_S = 10.0

_LEADERBOARD_V2 = ("ml-energy", "leaderboard-v2", "c3af7f31e231a2a7021c5f8e2a54dd712d02e6e2")
_BATCH_BRANCH = ("ml-energy", "leaderboard-v2", "d51f433032f61c79e862d3c4aee164c0f238c75e")
_LEADERBOARD_V3 = ("ml-energy", "leaderboard", "0cd52dab897c5d91a45f4d413038f3b8b4251b0f")
_ARGONNE = ("argonne-lcf", "LLM-Inference-Bench", "4211f5d4e9bc0145ed541b6d372d5d8223b44235")
_TASKS_2023 = ("chat", "chat-concise", "instruct", "instruct-concise")
_V3_MODEL_FILES = (
    "Qwen__Qwen3-235B-A22B-Instruct-2507-FP8__lm-arena-chat",
    "Qwen__Qwen3-235B-A22B-Instruct-2507__lm-arena-chat",
    "Qwen__Qwen3-235B-A22B-Thinking-2507-FP8__gpqa",
    "Qwen__Qwen3-235B-A22B-Thinking-2507__gpqa",
    "Qwen__Qwen3-30B-A3B-Instruct-2507__lm-arena-chat",
    "Qwen__Qwen3-30B-A3B-Thinking-2507__gpqa",
    "Qwen__Qwen3-32B__gpqa",
    "Qwen__Qwen3-32B__lm-arena-chat",
    "Qwen__Qwen3-8B__gpqa",
    "Qwen__Qwen3-8B__lm-arena-chat",
    "Qwen__Qwen3-Coder-30B-A3B-Instruct__sourcegraph-fim",
    "Qwen__Qwen3-Coder-480B-A35B-Instruct-FP8__sourcegraph-fim",
    "Qwen__Qwen3-Coder-480B-A35B-Instruct__sourcegraph-fim",
    "deepseek-ai__DeepSeek-R1-0528__gpqa",
    "deepseek-ai__DeepSeek-V3.1__gpqa",
    "deepseek-ai__DeepSeek-V3.1__lm-arena-chat",
    "google__gemma-3-12b-it__lm-arena-chat",
    "meta-llama__Llama-3.1-405B-Instruct-FP8__lm-arena-chat",
    "meta-llama__Llama-3.1-405B-Instruct__lm-arena-chat",
    "meta-llama__Llama-3.1-70B-Instruct__lm-arena-chat",
    "meta-llama__Llama-3.1-8B-Instruct__lm-arena-chat",
    "meta-llama__Llama-3.3-70B-Instruct__lm-arena-chat",
    "meta-llama__Llama-4-Maverick-17B-128E-Instruct-FP8__lm-arena-chat",
    "meta-llama__Llama-4-Scout-17B-16E-Instruct__lm-arena-chat",
    "nvidia__NVIDIA-Nemotron-Nano-12B-v2__gpqa",
    "nvidia__NVIDIA-Nemotron-Nano-12B-v2__lm-arena-chat",
    "nvidia__NVIDIA-Nemotron-Nano-9B-v2__gpqa",
    "nvidia__NVIDIA-Nemotron-Nano-9B-v2__lm-arena-chat",
    "openai__gpt-oss-120b__gpqa",
    "openai__gpt-oss-20b__gpqa",
)


def _pinned(repo: tuple[str, str, str], path: str) -> tuple[str, str]:
    """(URL, local path) of one file of a repository at a commit."""
    owner, name, commit = repo
    return f"{RAW_GITHUB}/{owner}/{name}/{commit}/{path}", f"{owner}+{name}@{commit[:7]}/{path}"


def _mlenergy_files() -> list[tuple[str, str]]:
    files = [
        _pinned(_LEADERBOARD_V2, f"data/legacy/{gpu}_{task}_benchmark.csv")
        for gpu in ("A100", "A40")
        for task in _TASKS_2023
    ]
    files += [_pinned(_BATCH_BRANCH, f"data/A40_{task}_benchmark.csv") for task in _TASKS_2023]
    files += [_pinned(_LEADERBOARD_V3, f"public/data/models/{n}.json") for n in _V3_MODEL_FILES]
    return files


DATASETS: dict[str, list[tuple[str, str]]] = {
    "watt-counts": [(WATT_COUNTS_URL, "watt_counts_subset.csv")],
    "mlenergy": _mlenergy_files(),
    "argonne": [
        _pinned(_ARGONNE, "Plots/All_results.csv"),
        _pinned(_ARGONNE, "Plots/Fig_16_a_b/power_results.csv"),
    ],
}
"""Data set name -> (URL, path under the destination folder) of every file it fetches."""


def default_dest(dataset: str) -> Path:
    """The folder a data set is fetched into: ``./data/external/<dataset>``."""
    return EXTERNAL_DATA_DIR / dataset


def import_hint(dataset: str, dest: Path) -> str:
    """The command that imports a fetched data set."""
    target = dest / "watt_counts_subset.csv" if dataset == "watt-counts" else dest
    return f"wattgpu data import {dataset} {target}"


def _download(url: str, target: Path, timeout: float) -> None:
    """Copy ``url`` to ``target`` through a temporary file, so a failure leaves nothing half."""
    with urllib.request.urlopen(url, timeout=timeout) as response:
        target.parent.mkdir(parents=True, exist_ok=True)
        partial = target.with_name(target.name + ".part")
        try:
            with partial.open("wb") as out:
                shutil.copyfileobj(response, out)
            partial.replace(target)
        finally:
            partial.unlink(missing_ok=True)


def fetch(
    dataset: str, dest: Path | None = None, *, timeout: float = DEFAULT_TIMEOUT_S
) -> list[Path]:
    """Download the public files of ``dataset`` into ``dest`` (existing files are replaced).

    Args:
        dataset: ``watt-counts``, ``mlenergy`` or ``argonne``.
        dest: target folder; default ``data/external/<dataset>``.
        timeout: seconds to wait for the server before calling the machine offline.

    Returns:
        The files written, in download order.

    Raises:
        DataError: unknown data set, the host cannot be reached (offline), or it answers an
            HTTP error.

    """
    if dataset not in DATASETS:
        raise DataError(f"unknown data set {dataset!r}; expected one of {', '.join(DATASETS)}")
    dest = default_dest(dataset) if dest is None else Path(dest)
    written = []
    for url, relative in DATASETS[dataset]:
        target = dest / relative
        host = urllib.parse.urlsplit(url).hostname
        try:
            _download(url, target, timeout)
        except urllib.error.HTTPError as exc:
            raise DataError(f"{url} answered HTTP {exc.code} ({exc.reason})") from None
        except (urllib.error.URLError, TimeoutError, ConnectionError) as exc:
            raise DataError(
                f"cannot reach {host}: this machine is offline ({_why(exc)}); "
                f"download {_what(dataset, url, dest)} by hand and run "
                f"`{import_hint(dataset, dest)}`"
            ) from None
        written.append(target)
    return written


def _what(dataset: str, url: str, dest: Path) -> str:
    """What to download by hand, and where to put it."""
    files = DATASETS[dataset]
    if len(files) == 1:
        return f"{url} into {dest / files[0][1]}"
    return (
        f"the {len(files)} files listed in wattgpu/data/fetch.py (first: {url}) into {dest} "
        "as <owner>+<repo>@<commit>/<path>"
    )


def _why(exc: BaseException) -> str:
    reason = getattr(exc, "reason", exc)
    return str(reason) or type(reason).__name__
