"""The serving loop, simulated: a client drives an engine's scheduler step by step, rows at once.

As Vidur simulates serving (replica schedulers per engine, request generators, an execution time
per step), vectorised over rows: numpy arrays hold each row's request slots (``scheduler.Slots``),
each iteration plans every live row's next step under its engine's policy
(``scheduler.plan_step``), costs it (``step.step_time``) and applies it. Decode steps that change
nothing but the context are taken together, up to the next event (a completion, an arrival, a
waiting request becoming eligible). Clients (``Client``): a closed loop of N users, an open loop
of Poisson arrivals, or one batch sent at once; lengths fixed or drawn from a quantile table by a
low-discrepancy sequence, so that a row's answer depends on its seed and its own inputs only,
never on the other rows simulated with it.

Out come, per row, the statistics each source measured and a user asks for: TTFT (mean,
median, p90, p99), the gaps between tokens (mean, median, p90, p99), the mean TPOT of a request,
a request's latency per output token (which counts its prefill), the GPUs' busy shares and the
decode batch.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from functools import cached_property

import numpy as np

from wattgpu.modeling.serving.scheduler import (
    DONE,
    IDLE,
    PADDING,
    RUNNING,
    WAITING,
    Plan,
    Scheduler,
    Slots,
    kv_used,
    pause_due,
    plan_step,
    preempt,
)
from wattgpu.modeling.serving.step import HostTime, TokenCosts, step_time

# Client kinds.
CLOSED, POISSON, ONESHOT, ROUNDS = range(4)
# Request slots per row: a closed loop of more users moves them in cohorts of N / SLOTS.
SLOTS = 32
# The most slots a row gets when its engine holds few requests at once (``slots_needed``).
WIDE_SLOTS = 128
# Poisson rows: the most requests in the system at once before the row counts as overloaded.
POISSON_SLOTS = 64
# The most iterations a row may take (a row that reaches it reports what it measured so far).
MAX_ITERATIONS = 1500
# The statistics' histograms: log-spaced bins from 10 us to 10^4 s.
_LOG_LO, _PER_DECADE, _BINS = -5.0, 100, 900
_GOLDEN = (np.sqrt(5.0) - 1.0) / 2.0
# A request's quantile levels of its prompt and its answer: seed + index x golden x _TURNS +
# _SHIFTS (mod 1); both sides drawn at once from ``Client.tables``.
_TURNS, _SHIFTS, _SIDES = np.array([1.0, _GOLDEN]), np.array([0.0, 0.5]), np.arange(2)
_PERCENTILES = (50.0, 90.0, 99.0)


@dataclass(frozen=True)
class Client:
    """What each row's client sends.

    Attributes:
        kind: ``CLOSED`` (``users`` users, each sending its next request when its last answer
            ends), ``ROUNDS`` (``users`` requests sent together, the next round when the last
            answer of this one ends), ``POISSON`` (arrivals at ``rate`` per second) or
            ``ONESHOT`` (``users`` requests at t = 0, none after).
        users: the closed loop's users, or the batch's requests.
        rate: requests per second (Poisson).
        prompt: mean prompt tokens; ``answer``: mean output tokens.
        prompt_shape: ``(rows, Q)`` quantiles of a prompt's length over its mean (all ones:
            fixed); ``answer_shape``: the same of an answer's.
        warmup: requests completed before measuring starts.
        measured: requests completed while measuring (a one-shot batch: all of them).

    """

    kind: np.ndarray
    users: np.ndarray
    rate: np.ndarray
    prompt: np.ndarray
    answer: np.ndarray
    prompt_shape: np.ndarray
    answer_shape: np.ndarray
    warmup: np.ndarray
    measured: np.ndarray

    def take(self, rows: np.ndarray) -> Client:
        """The clients of the rows ``rows`` only."""
        return Client(**{f.name: getattr(self, f.name)[rows] for f in fields(self)})

    # The kinds' masks, kept: the loop asks for them every step, and a row's client is fixed.
    @cached_property
    def open_loop(self) -> bool:
        """Whether any row is an open loop (only then does the loop track arrivals)."""
        return bool((self.kind == POISSON).any())

    @cached_property
    def resends(self) -> np.ndarray:
        """Rows whose users send again once answered (closed loops, rounds)."""
        return (self.kind == CLOSED) | (self.kind == ROUNDS)

    @cached_property
    def rounds(self) -> np.ndarray:
        """Rows whose client sends its requests in rounds."""
        return self.kind == ROUNDS

    @cached_property
    def one_shot(self) -> np.ndarray:
        """Rows whose client sends one batch and nothing after."""
        return self.kind == ONESHOT

    @cached_property
    def means(self) -> np.ndarray:
        """The mean prompt and answer, ``(rows, 2)``."""
        return np.column_stack([self.prompt, self.answer])

    @cached_property
    def tables(self) -> np.ndarray:
        """The prompt's and the answer's shape side by side, ``(rows, 2, Q)``."""
        return np.stack([self.prompt_shape, self.answer_shape], axis=1)

    @cached_property
    def table_means(self) -> np.ndarray:
        """The mean of each of ``tables``' piecewise-linear inverse CDFs (their trapezoids)."""
        tables = self.tables
        return ((tables[..., 1:] + tables[..., :-1]) / 2.0).mean(axis=-1)

    @cached_property
    def after(self) -> np.ndarray:
        """A finished request's slot: waiting again (closed loop), free (Poisson) or done."""
        kind = self.kind
        return np.where(kind == CLOSED, WAITING, np.where(kind == POISSON, IDLE, DONE))


STATISTICS = (
    "ttft_mean_s",
    "ttft_p50_s",
    "ttft_p90_s",
    "ttft_p99_s",
    "itl_mean_s",
    "itl_p50_s",
    "itl_p90_s",
    "itl_p99_s",
    "tpot_mean_s",
    "latency_per_token_s",
    "busy_share",
    "memory_share",
    "compute_share",
    "decode_batch",
    "throughput_tok_s",
    "requests_measured",
    "overloaded",
)
"""What ``simulate`` returns per row (s, shares of the measured window's wall time, sequences,
tokens / s, requests; ``overloaded``: 1 where the row ended before its measured requests did)."""


def simulate(
    costs: TokenCosts,
    host: HostTime,
    sched: Scheduler,
    client: Client,
    seed: int = 0,
    slots: int = SLOTS,
    jitter: np.ndarray | None = None,
) -> dict[str, np.ndarray]:
    """Simulate each row's client against its engine; the ``STATISTICS`` per row.

    ``slots``: request slots per row (``slots_needed`` says how many a row's cohorts need).
    ``jitter``: equally likely multipliers of a step's time (``serving.jitter``); the gaps'
    percentiles are read after each gap is spread over them (``jittered``), the loop itself and
    every mean unchanged. None: every step takes its time exactly.
    """
    n = len(client.kind)
    result = _Run.start(client, sched, seed, slots)
    live = np.arange(n)
    part, parts = result.take(live), (costs, host, sched, client)
    ended = np.zeros(n, bool)
    for _ in range(MAX_ITERATIONS):
        now = part.advance(*parts) & ~ended
        if now.any():
            result.put(live[now], part.take(np.nonzero(now)[0]))
            ended |= now
        if ended.all():
            break
        if np.count_nonzero(ended) > 0.25 * len(ended):
            # carry on with the rows still running only
            keep = np.nonzero(~ended)[0]
            live, part = live[keep], part.take(keep)
            parts = tuple(p.take(keep) for p in parts)
            ended = np.zeros(len(keep), bool)
    else:
        rest = np.nonzero(~ended)[0]
        result.put(live[rest], part.take(rest))
        result.overloaded[live[rest]] = 1.0
    return result.statistics(jitter)


def slots_needed(client: Client, sched: Scheduler) -> np.ndarray:
    """Request slots each row needs: ``SLOTS``, or more (up to ``WIDE_SLOTS``).

    More where a cohort of ``N / SLOTS`` users would be more than an eighth of what the engine
    runs at once (its sequence cap, or the requests its KV cache holds), so that admission is
    not lumpier than the engine's.
    """
    held = np.minimum(
        sched.max_seqs, sched.kv_tokens / np.maximum(client.prompt + client.answer, 1)
    )
    wanted = np.ceil(8.0 * client.users / np.maximum(held, 1.0))
    return np.where(client.kind == POISSON, POISSON_SLOTS, np.clip(wanted, SLOTS, WIDE_SLOTS))


def _shaped(client: Client, rows: np.ndarray, u: np.ndarray) -> np.ndarray:
    """Prompts and answers over their mean at the levels ``u`` of the rows ``rows``' tables.

    ``u``: ``(requests, 2)`` quantile levels of ``Client.tables``; the lengths are over the
    tables' means too, so that a length keeps its row's mean.
    """
    tables = client.tables
    q = tables.shape[-1]
    x = u * (q - 1)
    i = np.minimum(x.astype(int), q - 2)
    f = x - i
    at = rows[:, None]
    lo, hi = tables[at, _SIDES, i], tables[at, _SIDES, i + 1]
    return (lo + f * (hi - lo)) / client.table_means[rows]


@dataclass
class _Run:
    """Every row's simulation state (slots, clock, counters) and its statistics so far."""

    slots: Slots
    clock: np.ndarray
    next_order: np.ndarray
    requests: np.ndarray  # requests sent so far per slot (the length sequence's index)
    completed: np.ndarray
    waited: np.ndarray  # steps since a prefill (TGI's max_waiting_tokens)
    arrivals: np.ndarray  # Poisson: the row's next arrival time
    sent: np.ndarray  # Poisson: arrivals so far
    seed: np.ndarray
    # statistics over the measured window
    ttft_hist: np.ndarray
    gap_hist: np.ndarray
    sums: np.ndarray  # ttft, ttft weight, gap, gap weight, tpot, tpot weight, lpt, lpt weight
    wall: np.ndarray
    busy: np.ndarray  # gpu, memory, compute, decode x time, tokens
    overloaded: np.ndarray
    # samples not yet in their histogram (``_sample``): its name, rows, values, weights
    pending: list[tuple[str, np.ndarray, np.ndarray, np.ndarray]] = field(default_factory=list)

    @classmethod
    def start(cls, client: Client, sched: Scheduler, seed: int, slots: int) -> _Run:
        n = len(client.kind)
        poisson = client.kind == POISSON
        width = max(slots, POISSON_SLOTS) if poisson.any() else slots
        # a closed loop or a batch of more requests than slots moves in cohorts
        cohorts = np.where(poisson, width, np.maximum(np.round(np.minimum(client.users, width)), 1))
        column = np.arange(width)[None, :]
        used = column < cohorts[:, None]
        per_slot = np.where(poisson, 1.0, client.users / cohorts)
        weight = np.where(used, per_slot[:, None], 0.0)
        shape = (n, width)
        state = np.where(used & ~poisson[:, None], WAITING, IDLE)
        slots = Slots(
            weight=weight,
            state=state.astype(np.int8),
            prompt=np.zeros(shape),
            answer=np.zeros(shape),
            need=np.zeros(shape),
            context=np.zeros(shape),
            generated=np.zeros(shape),
            order=np.broadcast_to(column, shape).astype(float).copy(),
            arrived=np.zeros(shape),
            first=np.full(shape, np.nan),
            last=np.zeros(shape),
            started=np.full(shape, np.nan),
        )
        offset = (np.full(n, float(seed)) * _GOLDEN) % 1.0
        run = cls(
            slots=slots,
            clock=np.zeros(n),
            next_order=np.full(n, float(width)),
            requests=np.zeros(shape),
            completed=np.zeros(n),
            waited=np.zeros(n),
            arrivals=np.zeros(n),
            sent=np.zeros(n),
            seed=offset,
            ttft_hist=np.zeros((n, 2, _BINS)),
            gap_hist=np.zeros((n, 2, _BINS)),
            sums=np.zeros((n, 8)),
            wall=np.zeros(n),
            busy=np.zeros((n, 5)),
            overloaded=np.zeros(n),
        )
        run._draw(state == WAITING, client)
        poisson = client.kind == POISSON
        if poisson.any():
            run.arrivals = np.where(poisson, run._gap(client.rate, run.seed, run.sent), np.inf)
        return run

    def take(self, rows: np.ndarray) -> _Run:
        self._flush()
        values = {name: getattr(self, name)[rows] for name in _ROWS}
        return _Run(slots=self.slots.take(rows), **values)

    def put(self, rows: np.ndarray, part: _Run) -> None:
        part._flush()
        self.slots.put(rows, part.slots)
        for name in _ROWS:
            getattr(self, name)[rows] = getattr(part, name)

    def _sample(self, hist: str, rows: np.ndarray, value: np.ndarray, weight: np.ndarray) -> None:
        """Keep samples of the histogram ``hist`` (a field's name) until it is read (``_flush``).

        Added at once in the order they came (``np.add.at`` adds a repeated bin's in order), they
        sum to what adding them step by step would, bit for bit, for a few numpy calls in all
        instead of some fifteen a step.
        """
        self.pending.append((hist, rows, value, weight))

    def _flush(self) -> None:
        """Add the pending samples to their histograms."""
        for hist in ("ttft_hist", "gap_hist"):
            samples = [sample[1:] for sample in self.pending if sample[0] == hist]
            if samples:
                rows, value, weight = (np.concatenate(part) for part in zip(*samples, strict=True))
                _add(getattr(self, hist), rows, value, weight)
        self.pending.clear()

    def _draw(self, mask: np.ndarray, client: Client) -> None:
        """New requests in the slots ``mask``: their lengths, from each slot's sequence index."""
        # the slots by their flat index (row x width + column): ``put`` and ``take`` by it cost a
        # fraction of indexing by a (rows, columns) pair, and a draw writes eight arrays
        slots = np.flatnonzero(mask)
        if not slots.size:
            return
        s = self.slots
        width = s.weight.shape[1]
        rows, cols = slots // width, slots % width
        sent = self.requests.take(slots)
        index = sent * width + cols + 1.0
        u = (self.seed[rows, None] + (index * _GOLDEN)[:, None] * _TURNS + _SHIFTS) % 1.0
        lengths = np.maximum(np.round(client.means[rows] * _shaped(client, rows, u)), 1.0)
        prompt = lengths[:, 0]
        s.prompt.put(slots, prompt)
        s.answer.put(slots, lengths[:, 1])
        s.need.put(slots, prompt)
        s.context.put(slots, 0.0)
        s.generated.put(slots, 0.0)
        s.first.put(slots, np.nan)
        s.started.put(slots, np.nan)
        self.requests.put(slots, sent + 1.0)

    @staticmethod
    def _gap(rate: np.ndarray, seed: np.ndarray, index: np.ndarray) -> np.ndarray:
        """The time from one Poisson arrival to the next (by each row's sequence)."""
        u = (seed + (index + 1.0) * _GOLDEN * np.sqrt(2.0)) % 1.0
        with np.errstate(divide="ignore"):
            return -np.log1p(-u) / rate

    def _arrive(self, client: Client) -> None:
        """Poisson arrivals due by the clock go to free slots, in arrival order."""
        s = self.slots
        for _ in range(POISSON_SLOTS):
            due = self.arrivals <= self.clock
            free = s.state == IDLE
            has = due & free.any(axis=1)
            if not has.any():
                break
            rows = np.nonzero(has)[0]
            cols = np.argmax(free[rows], axis=1)
            mask = np.zeros(s.state.shape, bool)
            mask[rows, cols] = True
            s.state[rows, cols] = WAITING
            s.arrived[rows, cols] = self.arrivals[rows]
            s.order[rows, cols] = self.next_order[rows]
            self.next_order[rows] += 1.0
            self._draw(mask, client)
            self.sent[rows] += 1.0
            self.arrivals[rows] = self.arrivals[rows] + self._gap(
                client.rate[rows], self.seed[rows], self.sent[rows]
            )
        self.overloaded = np.maximum(
            self.overloaded, ((self.arrivals <= self.clock) & (s.state != IDLE).all(axis=1))
        )

    def advance(
        self, costs: TokenCosts, host: HostTime, sched: Scheduler, client: Client
    ) -> np.ndarray:
        """One iteration of every row; the rows whose simulation has ended."""
        s = self.slots
        if client.open_loop:
            self._idle_until_arrival(client)
            self._arrive(client)
        kv = kv_used(s, sched)
        if preempt(s, sched, self.next_order, kv).any():
            kv = kv_used(s, sched)
        plan = plan_step(s, sched, self.waited, kv)
        k = self._steps(plan, sched, client, costs, host, kv)
        weight = s.weight
        carrying = np.where(plan.decodes | plan.carried, weight, 0.0)
        m = carrying.sum(axis=1)
        # k identical steps, costed at their middle: each adds a token to every decode's context
        # and a chunk to the prompt being prefilled
        context = (carrying * s.context).sum(axis=1) + m * (k - 1.0) / 2.0
        prefill = plan.tokens
        chunk, pairs = self._prompt_work(plan, k)
        step = step_time(costs, host, m, context, prefill, pairs)
        dt = step.total * k
        start = self.clock
        self.clock = self.clock + dt
        recording = self.completed >= client.warmup
        if recording.any():
            rec = recording.astype(float)
            self.wall += rec * dt
            self.busy += rec[:, None] * np.column_stack(
                [step.gpu * k, step.memory * k, step.compute * k, m * dt, plan.decoded * k]
            )
        self.waited = np.where(prefill > 0, 0.0, self.waited + k)
        self._prefill(plan, chunk, k, start + step.total, recording)
        self._decode(plan, k, start, step.total, recording)
        self._complete(sched, client, recording)
        return self._ended(client)

    def _prompt_work(self, plan: Plan, k: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Prompt tokens per request each slot takes a step, and the middle step's pairs.

        The ``k`` steps are costed at their middle one: each prompt's chunk attends to what its
        prompt already holds.
        """
        take = plan.take
        if not (plan.tokens > 0).any():
            # a decode-only step (often, for few rows): nothing to prefill, no pairs
            return np.zeros_like(take), np.zeros_like(plan.tokens)
        s = self.slots
        chunk = np.where(s.weight > 0, take / np.maximum(s.weight, 1e-12), 0.0)
        done_before = np.where(s.need > 0, s.prompt + s.generated - s.need, 0.0)
        prefix = done_before + chunk * ((k[:, None] - 1.0) / 2.0 + 0.5)
        return chunk, (take * prefix).sum(axis=1)

    def _idle_until_arrival(self, client: Client) -> None:
        """An open loop's empty engine waits for the next arrival."""
        s = self.slots
        busy = ((s.state == WAITING) | (s.state == RUNNING)).any(axis=1)
        empty = (client.kind == POISSON) & ~busy
        idle = np.where(empty, np.maximum(self.arrivals - self.clock, 0.0), 0.0)
        self.wall += np.where(self.completed >= client.warmup, idle, 0.0)
        self.clock = self.clock + idle

    def _steps(
        self,
        plan: Plan,
        sched: Scheduler,
        client: Client,
        costs: TokenCosts,
        host: HostTime,
        kv: np.ndarray,
    ) -> np.ndarray:
        """How many identical steps to take at once, up to the next event of each row.

        Decode-only steps repeat until a request completes, the KV cache fills, a pausing
        engine's waiting requests become due or a Poisson request arrives; a step whose prompt
        tokens all go to one prompt that fills the budget repeats until that prompt has less
        than a chunk left (and its decodes, as above). ``kv``: the rows' ``kv_used``.
        """
        s = self.slots
        # (inf where nothing decodes)
        k = np.maximum(np.where(plan.decodes, s.answer - s.generated, np.inf).min(axis=1), 1.0)
        if sched.pause.any():
            waiting = np.where(s.state == WAITING, s.weight, 0.0).sum(axis=1)
            running = np.where((s.state == RUNNING) | (s.state == PADDING), s.weight, 0.0)
            due = pause_due(sched, running.sum(axis=1), waiting, self.waited)
            k = np.where((waiting > 0) & sched.pause, np.minimum(k, due), k)
        # the steps the cache holds while the decodes grow it (no limit where nothing decodes)
        grow = plan.decoded
        room = np.divide(sched.kv_tokens - kv, grow, out=np.full_like(grow, np.inf), where=grow > 0)
        k = np.where(sched.reserve_full, k, np.minimum(k, np.maximum(np.floor(room), 1.0)))
        took = plan.tokens
        if (took > 0).any():
            prefilling = plan.take > 0
            one = prefilling.sum(axis=1) == 1
            demand = np.where(prefilling, s.weight * s.need, 0.0).sum(axis=1)
            # the same chunk again: a prompt longer than the chunk the budget let it take
            chunks = np.where(
                one & (took < demand - 1e-9), np.floor(demand / np.maximum(took, 1e-9)), 1
            )
            k = np.where(took > 0, np.minimum(k, chunks), k)
        if client.open_loop:
            until = self.arrivals - self.clock
            one_step = self._one_step(plan, costs, host)
            arrivals = np.ceil(np.maximum(until, 0.0) / np.maximum(one_step, 1e-9))
            k = np.where(client.kind == POISSON, np.minimum(k, np.maximum(arrivals, 1.0)), k)
        return np.where(np.isfinite(k), np.maximum(np.floor(k), 1.0), 1.0)

    def _one_step(self, plan: Plan, costs: TokenCosts, host: HostTime) -> np.ndarray:
        """The time of the planned step, without its prompts' attention (a lower bound), s."""
        s = self.slots
        carrying = np.where(plan.decodes | plan.carried, s.weight, 0.0)
        m = carrying.sum(axis=1)
        context = (carrying * s.context).sum(axis=1)
        prefill = plan.take.sum(axis=1)
        return step_time(costs, host, m, context, prefill, np.zeros_like(m)).total

    def _prefill(
        self,
        plan: Plan,
        chunk: np.ndarray,
        k: np.ndarray,
        began: np.ndarray,
        recording: np.ndarray,
    ) -> None:
        """Prompt tokens in: the requests whose prompt is done get their (next) token.

        ``chunk``: each slot's prompt tokens per request a step; ``k``: the steps.
        """
        if not (plan.tokens > 0).any():
            return
        per_request = chunk * k[:, None]
        s = self.slots
        got = plan.take > 0
        admitted = plan.admitted
        s.state = np.where(admitted, RUNNING, s.state).astype(np.int8)
        s.started = np.where(got & np.isnan(s.started), began[:, None], s.started)
        s.need = np.where(got, np.maximum(s.need - per_request, 0.0), s.need)
        s.context = s.context + np.where(got, per_request, 0.0)
        finished = got & (s.need <= 1e-9)
        if not finished.any():
            return
        s.need = np.where(finished, 0.0, s.need)
        # the prefill's step gives the first (or, after a preemption, the next) token
        first = finished & np.isnan(s.first)
        if first.any():
            rows, cols = np.nonzero(first & recording[:, None])
            if rows.size:
                # a cohort's requests get their prompts in turn: where its prefill took several
                # steps, its first request is done a w-th of the way from the end of the first
                # step to the end of the last, its last request at the end
                began = s.started[rows, cols] - s.arrived[rows, cols]
                hi = self.clock[rows] - s.arrived[rows, cols]
                w = s.weight[rows, cols]
                lo = hi - (hi - began) * (1.0 - 1.0 / np.maximum(w, 1.0))
                for value in (lo + 0.25 * (hi - lo), lo + 0.75 * (hi - lo)):
                    self._sample("ttft_hist", rows, value, w / 2.0)
                self.sums[:, 0] += np.bincount(rows, w * (lo + hi) / 2.0, len(self.clock))
                self.sums[:, 1] += np.bincount(rows, w, len(self.clock))
        s.first = np.where(first, self.clock[:, None], s.first)
        s.generated = s.generated + finished
        s.context = s.context + finished
        s.last = np.where(finished, self.clock[:, None], s.last)

    def _decode(
        self, plan: Plan, k: np.ndarray, start: np.ndarray, each: np.ndarray, recording: np.ndarray
    ) -> None:
        """The decodes' ``k`` tokens each, and their gaps where the row is measuring."""
        s = self.slots
        dec = plan.decodes
        if not dec.any():
            return
        if recording.any():
            self._record_gaps(dec, k, start, each, recording)
        tokens = np.where(dec, k[:, None], 0.0)
        s.generated = s.generated + tokens
        s.context = s.context + tokens
        s.last = np.where(dec, self.clock[:, None], s.last)

    def _record_gaps(
        self, dec: np.ndarray, k: np.ndarray, start: np.ndarray, each: np.ndarray, rec: np.ndarray
    ) -> None:
        s = self.slots
        w = np.where(dec & rec[:, None], s.weight, 0.0)
        gaps = w.sum(axis=1) * k
        # a request's first gap in the run spans whatever stalled it since its last token; the
        # others are the run's steps
        first = start[:, None] + each[:, None] - s.last
        stalled = (w > 0) & (first > each[:, None] * (1.0 + 1e-9))
        stalled_time, plain = 0.0, gaps
        if stalled.any():
            rows, cols = np.nonzero(stalled)
            self._sample("gap_hist", rows, first[rows, cols], w[rows, cols])
            stalled_time = np.where(stalled, w * first, 0.0).sum(axis=1)
            plain = gaps - np.where(stalled, w, 0.0).sum(axis=1)
        steady = np.nonzero(plain > 0)[0]
        if steady.size:
            self._sample("gap_hist", steady, each[steady], plain[steady])
        self.sums[:, 2] += stalled_time + plain * each
        self.sums[:, 3] += gaps

    def _complete(self, sched: Scheduler, client: Client, recording: np.ndarray) -> None:
        """The answers that are done: their latencies counted, their slots freed or reused."""
        s = self.slots
        over = (s.state == RUNNING) & (s.need <= 0) & (s.generated >= s.answer)
        if not over.any():
            return
        w = np.where(over, s.weight, 0.0)
        if recording.any():
            self._record_latencies(over, w, recording)
        self.completed = self.completed + w.sum(axis=1)
        static = sched.static[:, None]
        batches = sched.static.any()
        freed = over
        if batches:
            # a static batch carries its finished requests until its longest answer ends
            s.state = np.where(over & static, PADDING, s.state).astype(np.int8)
            batch_over = sched.static & ~(s.state == RUNNING).any(axis=1)
            freed = (over & ~static) | ((s.state == PADDING) & batch_over[:, None])
        s.state = np.where(freed, client.after[:, None], s.state).astype(np.int8)
        # rounds: a request's user waits for the whole round to end, then all send together
        rounds = client.rounds
        if rounds.any():
            active = ((s.state == WAITING) | (s.state == RUNNING) | (s.state == PADDING)).any(1)
            next_round = (rounds & ~active)[:, None] & (s.state == DONE) & (s.weight > 0)
            s.state = np.where(next_round, WAITING, s.state).astype(np.int8)
            s.last = np.where(next_round, self.clock[:, None], s.last)
            freed = freed | next_round
        again = freed & client.resends[:, None] & (s.state == WAITING)
        if again.any():
            s.arrived = np.where(again, s.last, s.arrived)
            if batches:
                s.arrived = np.where(again & static, self.clock[:, None], s.arrived)
            order = self.next_order[:, None] + np.cumsum(again, axis=1)
            s.order = np.where(again, order, s.order)
            self.next_order = self.next_order + again.sum(axis=1)
            self._draw(again, client)

    def _record_latencies(self, over: np.ndarray, w: np.ndarray, recording: np.ndarray) -> None:
        """The TPOT and latency per token of the answers ``over`` (weights ``w``) that count."""
        s = self.slots
        counted = over & recording[:, None]
        many = counted & (s.answer > 1)
        tpot = (s.last - s.first) / np.maximum(s.answer - 1.0, 1.0)
        lpt = (s.last - s.arrived) / np.maximum(s.answer, 1.0)
        self.sums[:, 4] += np.where(many, w * tpot, 0.0).sum(axis=1)
        self.sums[:, 5] += np.where(many, w, 0.0).sum(axis=1)
        self.sums[:, 6] += np.where(counted, w * lpt, 0.0).sum(axis=1)
        self.sums[:, 7] += np.where(counted, w, 0.0).sum(axis=1)

    def _ended(self, client: Client) -> np.ndarray:
        s = self.slots
        ended = self.completed >= client.warmup + client.measured - 1e-9
        if client.one_shot.any():
            active = ((s.state == WAITING) | (s.state == RUNNING) | (s.state == PADDING)).any(1)
            ended |= client.one_shot & ~active
        if client.open_loop:
            # an open loop whose queue outgrew its slots ends there: the engine cannot keep up
            ended |= (client.kind == POISSON) & (self.overloaded > 0)
        return ended

    def statistics(self, jitter: np.ndarray | None = None) -> dict[str, np.ndarray]:
        self._flush()
        sums, wall = self.sums, np.maximum(self.wall, 1e-12)
        with np.errstate(invalid="ignore", divide="ignore"):
            out = {
                "ttft_mean_s": sums[:, 0] / sums[:, 1],
                "itl_mean_s": sums[:, 2] / sums[:, 3],
                "tpot_mean_s": sums[:, 4] / sums[:, 5],
                "latency_per_token_s": sums[:, 6] / sums[:, 7],
                "busy_share": np.minimum(self.busy[:, 0] / wall, 1.0),
                "memory_share": np.minimum(self.busy[:, 1] / wall, 1.0),
                "compute_share": np.minimum(self.busy[:, 2] / wall, 1.0),
                "decode_batch": self.busy[:, 3] / wall,
                "throughput_tok_s": self.busy[:, 4] / wall,
                "requests_measured": sums[:, 7],
                "overloaded": self.overloaded.astype(float),
            }
        gaps = self.gap_hist if jitter is None else jittered(self.gap_hist, jitter)
        for name, hist in (("ttft", self.ttft_hist), ("itl", gaps)):
            for p in _PERCENTILES:
                out[f"{name}_p{int(p)}_s"] = _quantile(hist, p / 100.0)
        return {k: out[k] for k in STATISTICS}


# The fields of ``_Run`` that hold a row each (all but its slots and pending samples).
_ROWS = tuple(f.name for f in fields(_Run) if f.name not in ("slots", "pending"))


def _add(hist: np.ndarray, rows: np.ndarray, value: np.ndarray, weight: np.ndarray) -> None:
    """Add ``weight`` at ``value`` (s) to the rows' histograms (weights, and weighted values)."""
    keep = (weight > 0) & np.isfinite(value)
    if not keep.any():
        return
    value, weight, rows = value[keep], weight[keep], rows[keep]
    bins = _bin(_position(value))
    np.add.at(hist, (rows, 0, bins), weight)
    np.add.at(hist, (rows, 1, bins), weight * value)


def _position(value: np.ndarray) -> np.ndarray:
    """Each value's place on the bins' scale: ``_PER_DECADE`` to a decade from 10^``_LOG_LO`` s."""
    return (np.log10(np.maximum(value, 1e-12)) - _LOG_LO) * _PER_DECADE


def _bin(position: np.ndarray) -> np.ndarray:
    """The histogram bin of each place on the scale (``_position``), the ends clipped."""
    return np.clip(position.astype(int), 0, _BINS - 1)


def jittered(hist: np.ndarray, multipliers: np.ndarray) -> np.ndarray:
    """Histograms whose every value is spread over ``multipliers``, each equally likely.

    A value v of weight w becomes v x m of weight w / len(multipliers) for each multiplier m: the
    histograms convolved, in log space, with the jitter's. Each bin's values enter at their mean.
    """
    weights, sums = hist[:, 0, :], hist[:, 1, :]
    rows, bins = np.nonzero(weights > 0)
    weight = weights[rows, bins]
    value = sums[rows, bins] / weight
    # equal multipliers (half of them are 1, the steps below the median) spread as one
    m, count = np.unique(np.asarray(multipliers, dtype=float), return_counts=True)
    share = weight[:, None] * (count / count.sum())[None, :]
    # a value times m lies log10(m) decades higher: its place is the value's plus m's shift (no
    # logarithm of every copy)
    bins = _bin(_position(value)[:, None] + (np.log10(m) * _PER_DECADE)[None, :])
    at = (rows[:, None] * _BINS + bins).ravel()
    each = share.ravel()
    spread = (share * value[:, None] * m[None, :]).ravel()
    # one bincount per plane: np.add.at over a row's 200 copies of every bin took a quarter of a
    # fleet's time
    size = hist.shape[0] * _BINS
    out = np.empty_like(hist)
    out[:, 0, :] = np.bincount(at, weights=each, minlength=size).reshape(-1, _BINS)
    out[:, 1, :] = np.bincount(at, weights=spread, minlength=size).reshape(-1, _BINS)
    return out


def _quantile(hist: np.ndarray, q: float) -> np.ndarray:
    """The ``q`` quantile of each row's histogram (NaN for an empty one), s.

    The mean of the values in the bin the quantile falls in: exact where that bin holds one
    value (a run of equal steps), within a bin's width (2.3 %) otherwise, and never a value
    between two clusters that no request saw.
    """
    weights, sums = hist[:, 0, :], hist[:, 1, :]
    total = weights.sum(axis=1)
    cdf = np.cumsum(weights, axis=1)
    i = np.minimum((cdf < q * total[:, None] * (1 - 1e-12)).sum(axis=1), weights.shape[1] - 1)
    at = np.arange(len(i))
    with np.errstate(invalid="ignore", divide="ignore"):
        value = sums[at, i] / weights[at, i]
    return np.where(total > 0, value, np.nan)
