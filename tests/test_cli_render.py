"""``wattgpu predict``'s text for people, from hand-written answer frames."""

from __future__ import annotations

import math

import pandas as pd
import pytest

from wattgpu.cli_render import render_answers, warnings_by_text

NAN = math.nan
# One query as `ask_models` answers it for every target: the wide shape (README's A10 example).
A10 = {
    "gpu": "NVIDIA A10",
    "model": "meta-llama/Llama-3.1-8B-Instruct",
    "scenario": "server",
    "request_rate_rps": NAN,
    "concurrency": 16.0,
    "batch_size": NAN,
    "input_tokens": 512.0,
    "output_tokens": 256.0,
    "num_gpus": 1.0,
    "power_prediction_w": 155.1,
    "power_lower_w": 121.4,
    "power_upper_w": 183.0,
    "itl_prediction_ms": 39.0,
    "itl_lower_ms": 24.8,
    "itl_upper_ms": 66.6,
    "ttft_prediction_ms": 1761.6,
    "ttft_lower_ms": 1105.1,
    "ttft_upper_ms": 3297.7,
    "warnings": "engine year 2025 outside the trained years (2023-2023); "
    "ttft: engine 'vllm' not seen in training (tgi)",
}
NO_NUMBERS = {c: NAN for c in A10 if c.startswith(("power_", "itl_", "ttft_"))}
FIT = "does not fit: weights need 141 GB, the GPU(s) have 24 GB"


def test_one_query_is_a_card_with_a_line_per_target_and_a_line_per_warning():
    assert render_answers(pd.DataFrame([A10])) == (
        "NVIDIA A10 · meta-llama/Llama-3.1-8B-Instruct · server, 16 users\n"
        "  512 in / 256 out tokens · 1 GPU\n"
        "power   155.1 W   (90 %: 121.4 – 183.0)\n"
        "itl      39.0 ms  (90 %: 24.8 – 66.6)\n"
        "ttft   1761.6 ms  (90 %: 1105.1 – 3297.7)\n"
        "warnings:\n"
        "  power, itl, ttft: engine year 2025 outside the trained years (2023-2023)\n"
        "  ttft: engine 'vllm' not seen in training (tgi)"
    )


def test_a_card_shows_the_client_assumed_and_the_engine_knobs_stated():
    row = {**A10, "client": "closed", "max_num_seqs": 4.0, "max_batched_tokens": NAN}
    lines = render_answers(pd.DataFrame([{**row, "chunked_prefill": 0.0}])).splitlines()
    assert lines[:2] == [
        "NVIDIA A10 · meta-llama/Llama-3.1-8B-Instruct · server, 16 users · client closed",
        "  engine: max-num-seqs 4, chunked-prefill off · 512 in / 256 out tokens · 1 GPU",
    ]


def test_a_card_names_the_spread_of_lengths_its_client_assumed():
    row = {**A10, "client": "closed", "length_spread": 0.5}
    lines = render_answers(pd.DataFrame([row])).splitlines()
    assert lines[1] == "  client closed (length spread 0.5) · 512 in / 256 out tokens · 1 GPU"
    # a client whose lengths follow a trace has no sigma to name
    row = {**A10, "client": "llm-pilot", "length_spread": NAN}
    lines = render_answers(pd.DataFrame([row])).splitlines()
    assert lines[1] == "  client llm-pilot · 512 in / 256 out tokens · 1 GPU"


def test_one_target_asked_alone_names_its_model_on_each_warning():
    # `--target power` (or `--url`): the model's own rows, with a target and a unit column
    row = {c: A10[c] for c in ("gpu", "model", "scenario", "request_rate_rps", "concurrency")}
    row |= {"batch_size": 32.0, "input_tokens": 1024.0, "output_tokens": 128.0, "num_gpus": 2.0}
    row |= {"scenario": "offline", "concurrency": NAN, "target": "power", "prediction": 612.25}
    row |= {"lower": 500.0, "upper": 700.04, "unit": "W", "warnings": "a; b"}
    assert render_answers(pd.DataFrame([row])) == (
        "NVIDIA A10 · meta-llama/Llama-3.1-8B-Instruct · offline, batch 32\n"
        "  1024 in / 128 out tokens · 2 GPUs\n"
        "power  612.2 W per GPU  (90 %: 500.0 – 700.0)\n"
        "warnings:\n"
        "  power: a\n"
        "  power: b"
    )


def test_power_on_several_gpus_says_it_is_per_gpu():
    # the A10 card above on 4 GPUs: power is each GPU's (the measured rows' mean_power_w is)
    lines = render_answers(pd.DataFrame([A10 | {"num_gpus": 4.0}])).splitlines()
    assert lines[1].endswith("· 4 GPUs")
    assert lines[2:4] == [
        "power   155.1 W per GPU  (90 %: 121.4 – 183.0)",
        "itl      39.0 ms         (90 %: 24.8 – 66.6)",
    ]


def test_a_configuration_that_cannot_run_shows_its_reason_instead_of_a_value():
    row = A10 | NO_NUMBERS | {"scenario": "offline", "concurrency": NAN}
    row["warnings"] = f"{FIT}; ttft: engine 'vllm' not seen in training (tgi)"
    assert render_answers(pd.DataFrame([row])) == (
        "NVIDIA A10 · meta-llama/Llama-3.1-8B-Instruct · offline, the engine's batch\n"
        "  512 in / 256 out tokens · 1 GPU\n"
        f"power  {FIT}\n"
        "itl    as above\n"
        "ttft   as above\n"
        "warnings:\n"
        "  ttft: engine 'vllm' not seen in training (tgi)"
    )


def test_a_missing_number_without_a_reason_says_so():
    row = A10 | {"itl_prediction_ms": NAN, "itl_lower_ms": NAN, "itl_upper_ms": NAN}
    row["warnings"] = ""
    assert render_answers(pd.DataFrame([row])).splitlines()[2:] == [
        "power   155.1 W   (90 %: 121.4 – 183.0)",
        "itl    no number",
        "ttft   1761.6 ms  (90 %: 1105.1 – 3297.7)",
    ]


def test_a_long_warning_and_a_long_query_wrap_at_spaces_within_the_width():
    long = (
        "does not fit: after 141 GB of weights the GPU(s)' 160 GB leave no room for the KV cache "
        "of one 768-token sequence (0.3 GB)"
    )
    row = A10 | {
        "gpu": "NVIDIA A100 SXM4 80GB",
        "model": "deepseek-ai/DeepSeek-R1-Distill-Llama-70B",
    }
    row |= {"scenario": "server", "concurrency": NAN, "request_rate_rps": 0.25, "num_gpus": 2.0}
    row["warnings"] = f"itl: {long}"
    assert render_answers(pd.DataFrame([row])).splitlines()[:2] == [
        "NVIDIA A100 SXM4 80GB · deepseek-ai/DeepSeek-R1-Distill-Llama-70B",
        "  server, 0.25 req/s · 512 in / 256 out tokens · 2 GPUs",
    ]
    assert render_answers(pd.DataFrame([row])).splitlines()[-3:] == [
        "warnings:",
        "  itl: does not fit: after 141 GB of weights the GPU(s)' 160 GB leave no room",
        "    for the KV cache of one 768-token sequence (0.3 GB)",
    ]


@pytest.mark.parametrize("width", [80, 60])
def test_no_line_of_a_card_is_wider_than_the_terminal(width):
    words = " ".join(f"word{i}" for i in range(60))
    row = A10 | {"model": "org/" + "x" * 90, "warnings": f"{words}; power: {words}"}
    unrunnable = A10 | NO_NUMBERS | {"warnings": f"does not fit: {words}; {words}"}
    for frame in ([row], [unrunnable]):
        lines = render_answers(pd.DataFrame(frame), width=width).splitlines()
        assert len(lines) > 8 and max(len(line) for line in lines) <= width, lines


def test_several_queries_are_their_own_columns_and_a_value_per_target_with_warnings_below():
    answer = ["power_prediction_w", "power_lower_w", "power_upper_w"]
    answer += ["itl_prediction_ms", "itl_lower_ms", "itl_upper_ms"]
    columns = ["gpu", "model", "scenario", "concurrency", *answer]
    first = {c: A10[c] for c in columns} | {"warnings": "power: a; itl: b"}
    second = first | {"gpu": "NVIDIA L4", "power_prediction_w": NAN, "itl_prediction_ms": NAN}
    second["warnings"] = f"{FIT}; itl: b"
    # the query file's own columns: names as the catalogue resolves them, the rest as given
    queries = pd.DataFrame(
        {
            "gpu": ["A10", "L4", "A10"],
            "model": [A10["model"]] * 3,
            "scenario": ["server"] * 3,
            "concurrency": [16.0] * 3,
            "engine": ["vllm", None, "sglang"],
        }
    )
    text = render_answers(pd.DataFrame([first, second, first | {"warnings": ""}]), queries=queries)
    assert text == (
        "row        gpu                            model scenario concurrency engine"
        "     power (W, 90 %)   itl (ms, 90 %)\n"
        "  0 NVIDIA A10 meta-llama/Llama-3.1-8B-Instruct   server          16   vllm"
        " 155.1 (121.4–183.0) 39.0 (24.8–66.6)\n"
        "  1  NVIDIA L4 meta-llama/Llama-3.1-8B-Instruct   server          16      -"
        "           no number        no number\n"
        "  2 NVIDIA A10 meta-llama/Llama-3.1-8B-Instruct   server          16 sglang"
        " 155.1 (121.4–183.0) 39.0 (24.8–66.6)\n"
        "warnings:\n"
        "row 0 · power: a\n"
        "row 0 · itl: b\n"
        f"row 1 · power, itl: {FIT}\n"
        "row 1 · itl: b"
    )


def test_several_queries_without_warnings_print_the_table_alone():
    rows = [A10 | {"warnings": ""}, A10 | {"warnings": ""}]
    text = render_answers(pd.DataFrame(rows))
    assert "warnings" not in text and len(text.splitlines()) == 3


def test_warnings_are_read_back_by_the_model_they_belong_to():
    from wattgpu.lifecycle.client import merged_warnings

    by_target = {"power": "a; b", "itl": "a; d", "ttft": "a; c; d"}
    merged = merged_warnings(by_target)
    assert list(warnings_by_text(merged, ("power", "itl", "ttft")).items()) == [
        ("a", ["power", "itl", "ttft"]),
        ("b", ["power"]),
        ("d", ["itl", "ttft"]),
        ("c", ["ttft"]),
    ]
    assert warnings_by_text("power: a", ("power",)) == {"power: a": ["power"]}
    assert warnings_by_text(NAN, ("power", "itl")) == {}


# The tails `ask_models` adds beside the medians of ITL and TTFT (the simulation's alone).
TAILS = {
    "itl_p90_ms": 40.1,
    "itl_p99_ms": 71.9,
    "itl_tails": "simulated",
    "ttft_p90_ms": 2500.3,
    "ttft_p99_ms": 3100.2,
    "ttft_tails": "simulated",
}
TAIL_NOTE = "p90, p99 of itl, ttft: the simulation's alone"


def test_a_card_gives_each_latency_its_tails_after_the_interval_and_says_where_they_come_from():
    lines = render_answers(pd.DataFrame([A10 | TAILS])).splitlines()
    assert lines[2:6] == [
        "power   155.1 W   (90 %: 121.4 – 183.0)",
        "itl      39.0 ms  (90 %: 24.8 – 66.6)      p90 40.1 · p99 71.9",
        "ttft   1761.6 ms  (90 %: 1105.1 – 3297.7)  p90 2500.3 · p99 3100.2",
        TAIL_NOTE,
    ]
    assert lines[6] == "warnings:"


def test_tails_that_do_not_fit_the_width_go_below_their_line():
    lines = render_answers(pd.DataFrame([A10 | TAILS]), width=60).splitlines()
    assert lines[3:7] == [
        "itl      39.0 ms  (90 %: 24.8 – 66.6)",
        "       p90 40.1 · p99 71.9",
        "ttft   1761.6 ms  (90 %: 1105.1 – 3297.7)",
        "       p90 2500.3 · p99 3100.2",
    ]
    assert max(len(line) for line in lines) <= 60


def test_one_latency_asked_alone_gives_its_own_tails():
    row = {c: A10[c] for c in ("gpu", "model", "scenario", "concurrency", "input_tokens")}
    row |= {"output_tokens": 256.0, "num_gpus": 1.0, "target": "ttft", "prediction": 300.0}
    row |= {"lower": 100.0, "upper": 900.0, "p90": 450.0, "p99": 600.0, "tails": "simulated"}
    row |= {"unit": "ms", "warnings": ""}
    assert render_answers(pd.DataFrame([row])).splitlines()[2:] == [
        "ttft  300.0 ms  (90 %: 100.0 – 900.0)  p90 450.0 · p99 600.0",
        "p90, p99 of ttft: the simulation's alone",
    ]


def test_a_latency_with_no_number_has_no_tails_and_no_note():
    row = A10 | TAILS | {c: NAN for c in TAILS if c.startswith("itl_") and c.endswith("_ms")}
    row |= {"itl_prediction_ms": NAN, "itl_lower_ms": NAN, "itl_upper_ms": NAN, "warnings": ""}
    row |= {c: NAN for c in TAILS if c.startswith("ttft_") and c.endswith("_ms")}
    assert render_answers(pd.DataFrame([row])).splitlines()[2:] == [
        "power   155.1 W   (90 %: 121.4 – 183.0)",
        "itl    no number",
        "ttft   1761.6 ms  (90 %: 1105.1 – 3297.7)",
    ]


def test_several_queries_give_the_tails_a_column_per_latency_and_say_where_they_come_from():
    second = A10 | TAILS | {"gpu": "NVIDIA L4", "itl_p90_ms": NAN, "itl_p99_ms": NAN}
    text = render_answers(pd.DataFrame([A10 | TAILS | {"warnings": ""}, second | {"warnings": ""}]))
    header, first, other, note = text.splitlines()
    assert header.endswith("itl p90 / p99 (ms) ttft p90 / p99 (ms)")
    assert first.split()[-6:] == ["40.1", "/", "71.9", "2500.3", "/", "3100.2"]
    assert other.split()[-4:] == ["-", "2500.3", "/", "3100.2"]
    assert note == TAIL_NOTE


def test_a_table_whose_rows_take_their_tails_from_two_sources_names_the_rows_of_each():
    # a closed loop's TTFT tails from measured ratios; a rate's, the simulation's
    closed = A10 | TAILS | {"ttft_tails": "measured ratio", "warnings": ""}
    rate = A10 | TAILS | {"concurrency": NAN, "request_rate_rps": 2.0, "warnings": ""}
    text = render_answers(pd.DataFrame([closed, rate, closed]), width=120)
    assert text.splitlines()[-2:] == [
        "p90, p99 of itl, ttft (rows 1): the simulation's alone",
        "p90, p99 of ttft (rows 0, 2): the median times the measured ratio at that many users",
    ]
