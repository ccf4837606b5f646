"""``wattgpu predict``'s answer for people: a card for one query, a table for several.

Pure text from the answer frame that ``lifecycle.client.ask_models`` returns, in either of its
shapes: one target's rows (``prediction``, ``lower``, ``upper``, ``unit``, ``warnings``) or the
wide rows of several targets (``power_prediction_w``, ..., one merged ``warnings``). JSON and CSV
print that frame as it is; only the people's format comes through here.
"""

from __future__ import annotations

import math
import textwrap
from typing import Any

import pandas as pd

from wattgpu.modeling.answering.queries import plain
from wattgpu.modeling.answering.tails import MEASURED_RATIO, PERCENTILES, SIMULATED
from wattgpu.modeling.physical.targets import TARGETS, UNIT

WIDTH = 80
# What the model's interval covers (``modeling.uncertainty.COVERAGE``, not imported: it would
# load the learning code for one label).
INTERVAL_LABEL = "90 %"
# How ``modeling.domain`` begins the warning that says why a configuration has no number.
NO_FIT = "does not fit"
# What an answer's ``tails`` says of its p90 and p99, in words.
TAIL_NOTES = {
    SIMULATED: "the simulation's alone",
    MEASURED_RATIO: "the median times the measured ratio at that many users",
}


def render_answers(
    answers: pd.DataFrame, width: int = WIDTH, queries: pd.DataFrame | None = None
) -> str:
    """``predict``'s answer as text: a card for one query, else a table and its warnings.

    Args:
        answers: ``ask_models``' frame, one row per query.
        width: the terminal's columns; the card and every warning line fit in it.
        queries: the queries asked, whose own columns a table shows (default: the answer's
            ``gpu``, ``model`` and ``scenario``).

    Returns:
        The text to print, without a final newline.

    """
    if len(answers) == 0:
        return "no queries"
    targets = answer_targets(answers)
    if len(answers) == 1:
        return render_card(answers.iloc[0].to_dict(), targets, width)
    return render_table(answers, targets, width, queries)


def answer_targets(answers: pd.DataFrame) -> tuple[str, ...]:
    """The targets an answer frame holds, in ``TARGETS`` order."""
    if "target" in answers.columns:
        return (str(answers["target"].iloc[0]),)
    return tuple(t for t in TARGETS if _column(t, "prediction") in answers.columns)


def render_card(row: dict[str, Any], targets: tuple[str, ...], width: int = WIDTH) -> str:
    """One query's card: the query, a line per target, then its warnings one per line.

    Power is per GPU: on several GPUs its line says so (``W per GPU``).

    A target with no number (a configuration that does not fit) shows the reason instead, and
    that reason is not repeated among the warnings. A latency's p90 and p99 follow its interval,
    and a line says where they come from.
    """
    warnings = warnings_by_text(row.get("warnings"), targets)
    answers = {t: _target_answer(row, t) for t in targets}
    gpus = row.get("num_gpus")
    if "power" in answers and isinstance(gpus, int | float) and gpus > 1:
        # power is per GPU (as measured rows state it): say so where there are several
        answers["power"] = (*answers["power"][:3], f"{answers['power'][3]} per GPU")
    reasons = {t: _reasons(t, warnings) for t, a in answers.items() if _missing(a[0])}
    lines = _pack(query_parts(row), width)
    tails = {t: _target_tails(row, t) for t in targets if t not in reasons}
    tails = {t: v for t, v in tails.items() if v}
    lines += _target_lines(answers, reasons, width, tails)
    answered = [t for t in targets if t not in reasons]
    lines += _tail_notes({t: [v[2]] for t, v in tails.items()}, width)
    lines += _shared_lines(row, answered, "novelty", "intervals for ", width)
    lines += _shared_lines(row, answered, "analogs", "measured analogs: ", width)
    shown = {text for texts in reasons.values() for text in texts}
    listed = {text: owners for text, owners in warnings.items() if text not in shown}
    if listed:
        lines.append("warnings:")
        for text, owners in listed.items():
            lines += _wrap(f"{', '.join(owners)}: {text}", width, "  ", "    ")
    return "\n".join(lines)


def _shared_lines(
    row: dict[str, Any], targets: list[str], column: str, heading: str, width: int
) -> list[str]:
    """One line of what each target's answer says in ``column``, targets that agree together.

    ``intervals for power, itl: unseen GPU`` (the kind of novelty each interval is calibrated
    for, ``modeling.learning.unseen``); ``measured analogs: itl: 5 rows, closest on ...`` (the
    measurements each answer leans on, ``modeling.learning.analogs``). Nothing where no target
    says anything (a model logged before the column, a query with no analog).
    """
    by_text: dict[str, list[str]] = {}
    for target in targets:
        text = row.get(column if "target" in row else f"{target}_{column}")
        if not _missing(text) and text:
            by_text.setdefault(str(text), []).append(target)
    if not by_text:
        return []
    parts = [f"{', '.join(owners)}: {text}" for text, owners in by_text.items()]
    return _wrap(heading + " · ".join(parts), width, "", "  ")


def _reasons(target: str, warnings: dict[str, list[str]]) -> list[str]:
    """Why a target has no number: its model's warnings that say what does not fit."""
    said = [text for text, owners in warnings.items() if target in owners]
    return [text for text in said if text.startswith(NO_FIT)] or ["no number"]


def render_table(
    answers: pd.DataFrame,
    targets: tuple[str, ...],
    width: int = WIDTH,
    queries: pd.DataFrame | None = None,
) -> str:
    """Several queries: each row's own columns and a column per target, then its warnings.

    A query's columns are those it gave (names resolved to the catalogue's), whole numbers
    whole; each target's column holds the value and its interval, the unit in its header
    (``power (W, 90 %)``: ``109.9 (49.3–150.0)``). A prediction with no number reads
    ``no number``; its reason is among that row's warnings. A latency with tails gets a column
    of its p90 and p99 (``itl p90 / p99 (ms)``: ``40.1 / 71.9``), and a line says where they
    come from. The rows are numbered from 0, as a query error names them. Every other column is
    in ``--format csv/json``.
    """
    own = list(queries.columns) if queries is not None else ["gpu", "model", "scenario"]
    table = pd.DataFrame({"row": [str(i) for i in range(len(answers))]})
    for column in own:
        source = answers if column in answers.columns else queries
        table[column] = [_cell(v) for v in source[column]]
    for target in targets:
        value, lower, upper, unit = (
            _answer_column(answers, target, part)
            for part in ("prediction", "lower", "upper", "unit")
        )
        header = f"{target} ({unit[0]}, {INTERVAL_LABEL})"
        table[header] = [
            _with_interval(v, lo, hi) for v, lo, hi in zip(value, lower, upper, strict=True)
        ]
    sources = {}
    for target in targets:
        tails = [_target_tails(row, target) for row in answers.to_dict("records")]
        if any(tails):
            table[f"{target} {' / '.join(PERCENTILES)} ({UNIT[target]})"] = [
                " / ".join(f"{v:.1f}" for v in t[:2]) if t else "-" for t in tails
            ]
            sources[target] = [t[2] if t else "" for t in tails]
    lines = [table.to_string(index=False), *_tail_notes(sources, width)]
    notes = []
    for i, text in enumerate(answers.get("warnings", [""] * len(answers))):
        for warning, owners in warnings_by_text(text, targets).items():
            notes += _wrap(f"row {i} · {', '.join(owners)}: {warning}", width, "", "    ")
    if notes:
        lines += ["warnings:", *notes]
    return "\n".join(lines)


def _answer_column(answers: pd.DataFrame, target: str, part: str) -> list[Any]:
    """One target's ``prediction``, ``lower``, ``upper`` or ``unit``, from either shape."""
    if "target" in answers.columns:
        return list(answers[part])
    if part == "unit":
        return [UNIT[target]] * len(answers)
    return list(answers[_column(target, part)])


def _with_interval(value: Any, lower: Any, upper: Any) -> str:
    """``109.9 (49.3–150.0)``, or ``no number``."""
    if _missing(value):
        return "no number"
    if _missing(lower) or _missing(upper):
        return f"{value:.1f}"
    return f"{value:.1f} ({lower:.1f}–{upper:.1f})"


def warnings_by_text(text: Any, targets: tuple[str, ...]) -> dict[str, list[str]]:
    """One row's warnings, each with the targets whose model gave it, in the order given.

    Reads what ``client.merged_warnings`` writes: ``"a; power: b"`` over ``("power", "ttft")``
    is ``{"a": ["power", "ttft"], "b": ["power"]}`` (a warning without a target's name is
    every model's). With one target, every warning is that target's.
    """
    found: dict[str, list[str]] = {}
    pieces = [] if _missing(text) else str(text or "").split("; ")
    for piece in pieces:
        owners, warning = list(targets), piece
        if len(targets) > 1:
            for target in targets:
                if piece.startswith(f"{target}: "):
                    owners, warning = [target], piece.removeprefix(f"{target}: ")
                    break
        if warning:
            found.setdefault(warning, [])
            found[warning] += [t for t in owners if t not in found[warning]]
    return found


def query_parts(row: dict[str, Any]) -> list[str]:
    """The query in words: GPU, LLM, scenario and load, client, engine knobs, tokens, GPUs.

    The client is the one the answer assumed (stated, else the load's own), with the spread of
    its lengths (``--length-spread``: stated, else the client's); the engine knobs
    only those the query stated (``--max-num-seqs 1``: ``max-num-seqs 1``).
    """
    parts = [str(row[c]) for c in ("gpu", "model") if not _missing(row.get(c))]
    parts.append(_load(row))
    if not _missing(row.get("client")) and row.get("client"):
        spread = row.get("length_spread")  # what the answer assumed: stated, else the client's
        lengths = "" if _missing(spread) else f" (length spread {plain(spread)})"
        parts.append(f"client {row['client']}{lengths}")
    knobs = _knobs(row)
    if knobs:
        parts.append("engine: " + ", ".join(knobs))
    tokens_in, tokens_out = row.get("input_tokens"), row.get("output_tokens")
    if not _missing(tokens_in) and not _missing(tokens_out):
        parts.append(f"{tokens_in:g} in / {tokens_out:g} out tokens")
    gpus = row.get("num_gpus")
    if not _missing(gpus):
        parts.append(f"{gpus:g} GPU" + ("" if gpus == 1 else "s"))
    return parts


def _knobs(row: dict[str, Any]) -> list[str]:
    """The engine knobs a row states, as the options name them: ``max-num-seqs 1``."""
    out = []
    for column in ("max_num_seqs", "max_batched_tokens"):
        if not _missing(row.get(column)):
            out.append(f"{column.replace('_', '-')} {plain(row[column])}")
    chunked = row.get("chunked_prefill")
    if not _missing(chunked):
        out.append("chunked-prefill " + ("on" if float(chunked) > 0 else "off"))
    return out


def _load(row: dict[str, Any]) -> str:
    """The scenario and the load that goes with it: users or a rate, or an offline batch."""
    scenario = str(row.get("scenario", ""))
    users, rate, batch = (row.get(c) for c in ("concurrency", "request_rate_rps", "batch_size"))
    if scenario == "server" and not _missing(users):
        return f"server, {users:g} users"
    if scenario == "server" and not _missing(rate):
        return f"server, {rate:g} req/s"
    if scenario == "offline":
        return "offline, " + ("the engine's batch" if _missing(batch) else f"batch {batch:g}")
    return scenario


def _target_answer(row: dict[str, Any], target: str) -> tuple[Any, Any, Any, str]:
    """(prediction, lower, upper, unit) of one target, from either shape of row."""
    if "target" in row:
        return row["prediction"], row["lower"], row["upper"], str(row["unit"])
    return (*(row[_column(target, c)] for c in ("prediction", "lower", "upper")), UNIT[target])


def _target_tails(row: dict[str, Any], target: str) -> tuple[float, float, str] | None:
    """(p90, p99, where they come from) of one target, from either shape; None: no tails."""
    if "target" in row:
        names = (*PERCENTILES, "tails") if row["target"] == target else ()
    else:
        unit = UNIT[target].lower()
        names = (*(f"{target}_{p}_{unit}" for p in PERCENTILES), f"{target}_tails")
    if not names or any(_missing(row.get(name)) for name in names[:2]):
        return None
    return float(row[names[0]]), float(row[names[1]]), str(row.get(names[2]) or "")


def _tail_notes(sources: dict[str, list[str]], width: int) -> list[str]:
    """Where the targets' tails come from: ``p90, p99 of itl, ttft: the simulation's alone``.

    ``sources``: per target, each row's source ('' where it has no tails). A target whose rows'
    tails come from more than one names its rows: ``ttft (rows 0, 3)``.
    """
    by_source: dict[str, list[str]] = {}
    for target, per_row in sources.items():
        distinct = [s for s in dict.fromkeys(per_row) if s]
        for source in distinct:
            rows = ", ".join(str(i) for i, s in enumerate(per_row) if s == source)
            label = target if len(distinct) == 1 else f"{target} (rows {rows})"
            by_source.setdefault(source, []).append(label)
    lines = []
    for source, owners in by_source.items():
        if source:
            text = f"{', '.join(PERCENTILES)} of {', '.join(owners)}: "
            lines += _wrap(text + TAIL_NOTES.get(source, source), width, "", "  ")
    return lines


def _target_lines(
    answers: dict[str, tuple[Any, Any, Any, str]],
    reasons: dict[str, list[str]],
    width: int,
    tails: dict[str, tuple[float, float, str]] | None = None,
) -> list[str]:
    """A line per target, numbers aligned: ``power  155.1 W   (90 %: 121.4 – 183.0)``.

    A target with tails ends its line with them (``p90 40.1 · p99 71.9``), on the next line
    where they do not fit ``width``.
    """
    tails = tails or {}
    name_width = max(len(t) for t in answers) + 2
    values = {t: f"{a[0]:.1f}" for t, a in answers.items() if t not in reasons}
    value_width = max((len(v) for v in values.values()), default=0)
    unit_width = max(len(a[3]) for a in answers.values())
    spans = {
        t: f"  ({INTERVAL_LABEL}: {a[1]:.1f} – {a[2]:.1f})"
        for t, a in answers.items()
        if t in values and not _missing(a[1]) and not _missing(a[2])
    }
    span_width = max((len(v) for t, v in spans.items() if t in tails), default=0)
    lines: list[str] = []
    said = None
    for target, (*_, unit) in answers.items():
        label = f"{target:<{name_width}}"
        if target in reasons:
            # the models share what does not fit: say it once, not once per target
            text = "as above" if reasons[target] == said else "; ".join(reasons[target])
            lines += _wrap(text, width, label, " " * name_width)
            said = reasons[target]
            continue
        line = f"{label}{values[target]:>{value_width}} {unit:<{unit_width}}"
        line += f"{spans.get(target, ''):<{span_width}}"
        if target in tails:
            high = " · ".join(
                f"{p} {v:.1f}" for p, v in zip(PERCENTILES, tails[target][:2], strict=True)
            )
            if len(line) + 2 + len(high) <= width:
                line += "  " + high
            else:
                lines.append(line.rstrip())
                line = " " * name_width + high
        lines.append(line.rstrip())
    return lines


def _pack(parts: list[str], width: int, separator: str = " · ") -> list[str]:
    """Join parts on as few lines as fit ``width``, breaking only between parts."""
    lines: list[str] = []
    for part in parts:
        if lines and len(lines[-1]) + len(separator) + len(part) <= width:
            lines[-1] += separator + part
        else:
            lines += _wrap(part, width, "  " if lines else "", "  ")
    return lines


def _wrap(text: str, width: int, first: str, rest: str) -> list[str]:
    """``text`` in lines of at most ``width``, broken at spaces, not at a model id's hyphens."""
    return textwrap.wrap(
        text, width, initial_indent=first, subsequent_indent=rest, break_on_hyphens=False
    )


def _column(target: str, answer: str) -> str:
    """A wide answer's column, as ``ask_models`` names it: ``power_prediction_w``."""
    return f"{target}_{answer}_{UNIT[target].lower()}"


def _cell(value: Any) -> str:
    """A query's cell as it was given: whole numbers whole, ``-`` where there is none."""
    if _missing(value):
        return "-"
    return (
        plain(value)
        if isinstance(value, float | int) and not isinstance(value, bool)
        else str(value)
    )


def _missing(value: Any) -> bool:
    """Whether a cell holds nothing: ``None`` or NaN."""
    return value is None or (isinstance(value, float) and math.isnan(value))
