"""The served profile's sums: py-spy's raw samples, each stack charged to its thread group and
to the innermost frame a part names, in µs per request."""

from __future__ import annotations

from pathlib import Path

from bench.served_profile import parts_of


def test_samples_go_to_their_thread_and_the_innermost_part_they_name(tmp_path: Path) -> None:
    raw = tmp_path / "memplane-write.txt"
    raw.write_text("\n".join([  # py-spy's raw format: "thread (tid): name;frame;frame count"
        # the event loop: uvicorn's HTTP parser, innermost
        "thread (1): MainThread;<module> (/venv/bin/memplane:10);"
        "data_received (/venv/uvicorn/protocols/http/httptools_impl.py:120) 30",
        # a request thread: the bucket's put under memplane's write path wins (innermost)
        "thread (2): AnyIO worker thread;run (/py/threading.py:1000);"
        "set_value (/src/control_plane/memories/write.py:80);"
        "put (/src/storage_adapters/local.py:200) 20",
        # a request thread in memplane's own path with nothing more specific under it
        "thread (2): AnyIO worker thread;run (/py/threading.py:1000);"
        "set_value (/src/control_plane/memories/write.py:80) 10",
        # a frame no part names
        "thread (3): AnyIO worker thread;mystery (/elsewhere.py:1) 5",
    ]) + "\n")

    found = parts_of(raw, requests=100, rate=1000)

    # 30 samples at 1,000 Hz over 100 requests: 300 µs per request
    assert found == {
        "event loop": {"uvicorn HTTP": 300.0},
        "request threads": {"bucket (local)": 200.0, "memplane memories path": 100.0,
                            "other": 50.0},
    }


def test_context_switches_count_every_thread_of_the_process() -> None:
    """Each sleep takes its thread off the processor: a thread of ours that sleeps 20 times
    adds at least 20 switches to the process's count (read while that thread is still
    there: the count is of the threads the process has)."""
    import os
    import threading
    import time

    from bench.served_profile import _switches, since

    before = _switches(os.getpid())
    slept, done = threading.Event(), threading.Event()

    def sleeper() -> None:
        for _ in range(20):
            time.sleep(0.001)
        slept.set()
        done.wait(10)

    thread = threading.Thread(target=sleeper)
    thread.start()
    try:
        assert slept.wait(10)
        assert since(before, _switches(os.getpid())) >= 20
    finally:
        done.set()
        thread.join()


def test_a_thread_that_ended_between_two_readings_takes_nothing_from_the_round() -> None:
    # Thread 2 exited (an idle pool thread), thread 3 started: 30 by thread 1, 7 by thread 3.
    from bench.served_profile import since

    assert since({1: 100, 2: 50}, {1: 130, 3: 7}) == 37
