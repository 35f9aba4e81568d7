#!/usr/bin/env python3
"""Runs the profiler test's trace case in a scratch directory and loads the Chrome trace it wrote
with Python's json module (an independent parser): the file chrome://tracing and Perfetto read."""
import glob
import json
import os
import subprocess
import sys
import tempfile

exe = sys.argv[1]
with tempfile.TemporaryDirectory() as d:
    subprocess.run([exe, "[trace]"], cwd=d, check=True, stdout=subprocess.DEVNULL)
    files = glob.glob(os.path.join(d, "kfuse_profiler_trace_*.json"))
    assert len(files) == 1, files
    with open(files[0]) as f:
        doc = json.load(f)
    events = doc["traceEvents"]
    assert len(events) == 2, events
    for e in events:
        assert e["ph"] == "X" and e["dur"] >= 0 and "ts" in e and "pid" in e and "tid" in e, e
        assert "flops" in e["args"] and "bytes" in e["args"], e
print("trace json ok")
