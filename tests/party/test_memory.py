"""The memory of a daemon's process tree (`party.memory`): its descendants found by their
parents, grandchildren too, whatever threads the daemon runs; a sampler that looks for
new descendants only every `rescan_s`."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time

from vfl.party.memory import ProcessTree, descendants, rss, tree_bytes

# a child that starts a grandchild and prints its pid, then both wait to be killed
GRANDPARENT = (
    "import subprocess, sys, time; "
    "g = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)']); "
    "print(g.pid, flush=True); time.sleep(60)"
)


def test_descendants_are_children_and_theirs_and_their_memory_counts() -> None:
    # Prepare: a child with a grandchild, and many idle threads here
    child = subprocess.Popen([sys.executable, "-c", GRANDPARENT], stdout=subprocess.PIPE)
    stop = threading.Event()
    idle = [threading.Thread(target=stop.wait) for _ in range(200)]
    for t in idle:
        t.start()
    try:
        assert child.stdout is not None
        grandchild = int(child.stdout.readline())
        # Execute
        below = descendants(os.getpid())
        total = tree_bytes()
        mine, childs = rss(os.getpid()), rss(child.pid)
    finally:
        stop.set()
        child.kill()
        child.wait()
        os.kill(grandchild, 9)
    # Assert
    assert {child.pid, grandchild} <= set(below)
    assert childs > 0 and mine > 0
    assert total >= 0.9 * (mine + childs)  # (this process's memory moves meanwhile)


def test_a_process_tree_looks_for_new_descendants_every_rescan() -> None:
    sample = ProcessTree(rescan_s=0.5)
    alone = sample()
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        time.sleep(0.2)  # started, not yet looked for
        unseen = sample()
        time.sleep(0.5)
        seen = sample()
    finally:
        child.kill()
        child.wait()
    assert unseen < alone + 4 * 2**20 < seen  # a Python child holds well over 4 MiB
