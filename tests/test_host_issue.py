"""measure/models/host_issue.py: the host's issue time of a step, after a synchronize and without one, with a
stand-in step and a stand-in synchronize (no GPU)."""

import time

from ssmbench.measure.models.host_issue import REPEATS, host_issue


def test_issue_time_is_the_call_alone_and_each_step_starts_synchronized():
    events = []

    def call():
        events.append("call")
        time.sleep(0.002)

    def sync():
        events.append("sync")
        time.sleep(0.02)  # a device still draining: not part of the issue time

    out = host_issue(call, sync)
    assert events == ["sync", "call"] * REPEATS + ["sync"]
    assert out["label"] == "measurement" and len(out["samples_s"]) == REPEATS
    assert 0.002 <= out["issue_s"] < 0.02
