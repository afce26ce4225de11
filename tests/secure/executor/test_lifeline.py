"""Child processes end with their parent: a process with a local executor's worker pool
(and so the multiprocessing resource tracker) and a PSI blinder's own pool is killed with
SIGKILL; within seconds none of its children is alive."""

from __future__ import annotations

import signal
import subprocess
import sys
import time

import pytest

from tests.support.proctree import describe, tree, wait_gone

PARENT = """
import sys, time
from vfl.secure.executor.local import LocalExecutor
from vfl.secure.psi.curve import Blinder

if __name__ == "__main__":
    executor = LocalExecutor(workers=2)
    executor.warm_up()
    blinder = Blinder(workers=2, parallel_min=1)
    blinder.submit(bytes(32 * 64)).exception()  # starts its pool (the points are invalid)
    print("ready", flush=True)
    time.sleep(120)
"""


@pytest.mark.subprocess
def test_a_killed_parents_pools_and_resource_tracker_end_with_it(tmp_path) -> None:
    # Prepare: a parent with two pools of two workers each, and the resource tracker
    script = tmp_path / "parent.py"
    script.write_text(PARENT)
    proc = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
        children = tree(proc.pid) - {proc.pid}
        assert len(children) >= 4, describe(children)  # the pools' workers, the tracker
        # Execute
        begun = time.monotonic()
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        left = wait_gone(children, timeout=10.0)
    finally:
        proc.kill()
    # Assert
    assert not left, describe(left)
    assert time.monotonic() - begun < 5.0
