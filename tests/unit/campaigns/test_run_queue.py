"""``campaigns.ceilings.run_queue_seconds``: how long a process's threads waited for a CPU,
read from the kernel (``/proc/<pid>/task/*/schedstat``), printed beside the room's CPU per
action. Figures are never judged; what is checked is where they are read from."""

from __future__ import annotations

import os
import sys
import threading
from pathlib import Path

import pytest

from campaigns.ceilings import run_queue_seconds


def test_a_process_that_is_gone_waited_nothing() -> None:
    assert run_queue_seconds(2**22 + 12345) == 0.0


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="Linux /proc only")
def test_every_thread_of_the_process_is_counted() -> None:
    main = Path(f"/proc/self/task/{threading.get_native_id()}/schedstat")
    if not main.exists():
        pytest.skip("the kernel keeps no schedstat")
    release = threading.Event()
    worker = threading.Thread(target=release.wait)
    worker.start()
    try:
        tids = os.listdir("/proc/self/task")
        assert len(tids) >= 2
        own = sum(int(Path(f"/proc/self/task/{tid}/schedstat").read_text().split()[1])
                  for tid in tids) / 1e9
        # Read again after: the counters only grow while the threads live.
        assert run_queue_seconds(os.getpid()) >= own >= 0.0
    finally:
        release.set()
        worker.join()
