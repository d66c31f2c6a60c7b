"""A call repeated in a daemon thread (runtime/periodic.py): the memory's sampling and the heap's trims run on it."""

from __future__ import annotations

import time

from llm_finetuning.runtime.periodic import Periodic


def test_a_failing_call_does_not_end_the_thread_and_stop_ends_it():
    calls = []

    def action() -> None:
        calls.append(time.monotonic())
        if len(calls) == 1:
            raise RuntimeError("the first call fails")

    every = Periodic(action, 0.02, name="test-periodic").start()
    deadline = time.monotonic() + 5
    while len(calls) < 3 and time.monotonic() < deadline:
        time.sleep(0.01)
    every.stop()
    assert len(calls) >= 3  # the calls went on after the failure
    assert not every.running
    stopped_at = len(calls)
    time.sleep(0.1)
    assert len(calls) == stopped_at  # none after stop


def test_an_unstarted_one_stops_quietly():
    every = Periodic(lambda: None, 1.0, name="never-started")
    assert not every.running
    every.stop()
