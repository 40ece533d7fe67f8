"""The runtime: everything with threads and clocks.

- :mod:`~rlpulse.runtime.engine` polls one watch and runs rounds, inline or
  in the background, and stops them under one deadline;
- :mod:`~rlpulse.runtime.poller` is the polling thread,
  :mod:`~rlpulse.runtime.agenda` which watches its rounds call,
  :mod:`~rlpulse.runtime.watchdog` the thread that leaves a slow call
  behind, :mod:`~rlpulse.runtime.supervision` their table of calls left
  behind;
- :mod:`~rlpulse.runtime.delivery` hands payloads and events to the sinks
  (:mod:`~rlpulse.runtime.sinks`), through per-sink queues and sender
  threads in background mode (:mod:`~rlpulse.runtime.queues`), sending
  again after a back-off what a sink failed to take for a while
  (:mod:`~rlpulse.runtime.retry`);
- :mod:`~rlpulse.runtime.reporting` holds the exact counters and the
  warnings, :mod:`~rlpulse.runtime.events` the events and their bus,
  :mod:`~rlpulse.runtime.threads` rlpulse's threads and their CPU time,
  :mod:`~rlpulse.runtime.deadline` the deadline ``stop()`` spends,
  :mod:`~rlpulse.runtime.lifecycle` the exit hook and fork safety.
"""
