"""The LLM a command asks about, by ``--model`` and ``--model-config`` (predict, recommend).

An LLM in the catalogue is asked about by name. One the catalogue lacks is described by its
``config.json``: the file ``--model-config`` names, else, for a Hugging Face id (``ORG/NAME``),
the file in the model's repository on the Hub (``wattgpu.data.hub``). The config is read and
checked here, before any model is loaded, so that a config that cannot be read is refused in
one line that names where it came from; the query then carries its text (``model_config``).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import click

from wattgpu.config import Settings
from wattgpu.errors import DataError


@dataclass(frozen=True)
class AskedLlm:
    """The LLM of a command: the name its answer shows, and its config's text where one is read.

    Attributes:
        name: the name as given (``--model``), else the config's ``_name_or_path``, else the
            config's path.
        config: the config.json's text; ``None`` for an LLM of the catalogue.

    """

    name: str
    config: str | None = None


def model_config_option(func: Any) -> Any:
    """``--model-config PATH``: the config.json that describes an LLM the catalogue lacks."""
    return click.option(
        "--model-config",
        "model_config",
        type=click.Path(path_type=Path),
        default=None,
        help="The LLM's config.json (or a model folder holding one), for an LLM the catalogue "
        "lacks; --model then only names it. Without it, an --model ORG/NAME the catalogue "
        "lacks is read from the Hugging Face Hub (your cache and token; HF_HUB_OFFLINE=1: "
        "the cache only).",
    )(func)


def asked_llm(settings: Settings, name: str | None, config_path: Path | None) -> AskedLlm:
    """The LLM ``--model NAME`` and ``--model-config PATH`` ask about (one of them at least).

    A name the catalogue resolves is asked about as it is; a Hugging Face id it lacks is read
    from the Hub. Other names are left to the query check, which lists the closest ones.

    Raises:
        DataError: the config cannot be read or describes no LLM wattgpu can read (naming the
            file, or the Hub id, and the field); no network and no cached copy of a Hub config.

    """
    from wattgpu.data import hub
    from wattgpu.data.catalog import Catalog
    from wattgpu.data.llm_configs import parse_config, read_config

    if config_path is not None:
        text, source = hub.read_config_file(config_path), str(config_path)
    elif name is None:
        raise click.UsageError("give --model (or --model-config)")
    else:
        catalog = Catalog.load(settings.gpus_csv, settings.llms_csv)
        found = catalog.match("llm", name)
        if found.canonical is not None or found.family or name.count("/") != 1:
            return AskedLlm(name)
        try:
            text = hub.hub_config(name)
        except DataError as exc:
            if not found.closest:
                raise
            # a typo of a catalogue name, as likely as an id the Hub has
            closest = ", ".join(found.closest)
            raise DataError(f"{exc}; or a catalogue LLM, closest: {closest}") from None
        source = f"config.json of {name} (Hugging Face Hub)"
    config = parse_config(text, source)
    read_config(config, source)  # refuse here, in the file's name, what the query would
    label = name or str(config.get("_name_or_path") or "").strip() or str(config_path)
    return AskedLlm(label, text)
