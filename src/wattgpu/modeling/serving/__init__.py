"""The serving loop, simulated: a client drives an engine's scheduler step by step, rows at once.

As Vidur simulates serving (a scheduler per engine, a request generator, a step-cost model
behind one interface), vectorised over rows:

* ``workload``: each row's client (``data/clients.csv``), scheduler (its engine's release line,
  ``data/engine_lines.csv``, and the user's knobs) and host time;
* ``scheduler``: what each engine's policy runs in the next step (prefill-first whole steps,
  decode-first chunks, in-flight batching, TGI's prefill pause, static batches), admission
  under the sequence cap and the KV cache, preemption of the newest request;
* ``step``: a step's time from the prior's costs of its tokens and the host's time;
* ``loop``: the clients (closed loop, rounds, Poisson, one batch) and the loop itself, with the
  statistics each source measured;
* ``run``: all of it for rows carrying the physics features (``simulate_rows``).

Nothing in the answers reads it yet: the prior is still the closed form of ``physical.physics``.
"""
