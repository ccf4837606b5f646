"""An LLM's ``config.json``: a local file, or the model's repository on the Hugging Face Hub.

The one module that reaches the Hub. It asks ``huggingface_hub`` (imported when asked) for the
file as the user's own tools would: their cache (``HF_HOME``, ``HF_HUB_CACHE``) and their token
(``HF_TOKEN``, ``hf auth login``); ``HF_HUB_OFFLINE=1`` reads the cache only. It returns the
file's text; reading the fields is pure (``wattgpu.data.llm_configs``). The served model never
comes here: a REST query carries its config in the ``model_config`` column.
"""

from __future__ import annotations

import logging
import os
import socket
from pathlib import Path
from urllib.parse import urlparse

from wattgpu.errors import DataError

CONFIG_FILE = "config.json"
# What a refusal tells the user to do instead (the CLI's option for a local config).
GIVE_IT = "give the model's config.json with --model-config PATH"
# The longest config read: a config.json is a few kB (a multimodal one with its layer list, tens).
MAX_CONFIG_BYTES = 4 * 1024 * 1024
# How long the Hub's host may take to accept a connection before the cache is read instead.
PROBE_TIMEOUT_S = 3.0


def read_config_file(path: Path) -> str:
    """The text of a local ``config.json``.

    Raises:
        DataError: the file is missing, a folder, too large or not UTF-8 text.

    """
    path = Path(path)
    if path.is_dir():
        if (path / CONFIG_FILE).is_file():  # a model's folder: its config.json
            path = path / CONFIG_FILE
        else:
            raise DataError(f"model config {path} is a folder without a {CONFIG_FILE}")
    if not path.is_file():
        raise DataError(f"model config not found: {path} (give a model's {CONFIG_FILE})")
    if path.stat().st_size > MAX_CONFIG_BYTES:
        raise DataError(
            f"model config {path} is {path.stat().st_size:,} bytes; a {CONFIG_FILE} is at most "
            f"{MAX_CONFIG_BYTES:,}"
        )
    try:
        return path.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise DataError(f"model config {path} is not UTF-8 text (a {CONFIG_FILE}?)") from None


def _hub_reachable() -> bool:
    """Whether the Hub's host answers a connection at all (a proxy is taken to reach it).

    huggingface_hub retries a download it cannot start for about 20 s before it reads the
    cache; a machine that cannot resolve or reach the host reads its cache at once instead.
    """
    from huggingface_hub import constants

    if any(os.environ.get(v) for v in ("HTTPS_PROXY", "https_proxy", "ALL_PROXY", "all_proxy")):
        return True
    url = urlparse(constants.ENDPOINT)
    port = url.port or (80 if url.scheme == "http" else 443)
    try:
        socket.create_connection((url.hostname, port), timeout=PROBE_TIMEOUT_S).close()
    except OSError:
        return False
    return True


def hub_config(repo_id: str) -> str:
    """The text of model ``repo_id``'s ``config.json`` on the Hugging Face Hub (or its cache).

    Raises:
        DataError: in one line that says why and names ``--model-config``: no network and no
            cached copy, no such model (or a private one), a gated model without access, a
            repository without a config.json, or an id that is no Hub id.

    """
    from huggingface_hub import hf_hub_download
    from huggingface_hub.errors import (
        EntryNotFoundError,
        GatedRepoError,
        HfHubHTTPError,
        HFValidationError,
        LocalEntryNotFoundError,
        RepositoryNotFoundError,
    )

    what = f"LLM {repo_id!r} is not in the catalogue and"
    # huggingface_hub retries a failed connection five times (about 20 s), each with a warning
    # line; the refusal below says what went wrong in one.
    hub_log = logging.getLogger("huggingface_hub")
    level = hub_log.level
    hub_log.setLevel(logging.ERROR)
    try:
        path = hf_hub_download(repo_id, CONFIG_FILE, local_files_only=not _hub_reachable())
    except HFValidationError:
        raise DataError(f"{what} is no Hugging Face model id (ORG/NAME); {GIVE_IT}") from None
    except LocalEntryNotFoundError:  # offline (HF_HUB_OFFLINE, or no network) and not cached
        raise DataError(
            f"{what} its {CONFIG_FILE} cannot be read: the Hugging Face Hub is out of reach "
            f"(offline) and the cache holds no copy; {GIVE_IT}"
        ) from None
    except GatedRepoError:
        raise DataError(
            f"{what} it is gated on the Hugging Face Hub: accept its licence and log in "
            f"(hf auth login, or HF_TOKEN), or {GIVE_IT}"
        ) from None
    except RepositoryNotFoundError:
        raise DataError(
            f"{what} the Hugging Face Hub has no such model (or it is private: log in); {GIVE_IT}"
        ) from None
    except EntryNotFoundError:
        raise DataError(f"{what} its Hub repository has no {CONFIG_FILE}; {GIVE_IT}") from None
    except (HfHubHTTPError, OSError) as exc:
        reason = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise DataError(f"{what} reading its {CONFIG_FILE} failed ({reason}); {GIVE_IT}") from None
    finally:
        hub_log.setLevel(level)
    return read_config_file(Path(path))
