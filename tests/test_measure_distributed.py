"""Sharded measurement (``measure --distributed``, measure/distributed.py): the assignment, the per-rank
files and their merge in-process, and the whole path under torchrun with gloo on the CPU (2 ranks),
including a rank killed mid-run."""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

from ssmbench.measure.distributed import (
    Part,
    merge,
    merge_folder,
    rank_device,
    rank_files,
    shard_of,
)
from ssmbench.measure.results import read_dir, read_results
from ssmbench.measure.suite import load_suite, parse_suite
from ssmbench.measure.sweep import SweepConfig, run_sweep, select
from ssmbench.measure.timing import TimingSettings

FAST = TimingSettings(target_s=0.001, warmup_calls=1, warmup_s=0.0, min_repeats=2, max_repeats=5)
REPO = Path(__file__).resolve().parent.parent


def _suite(B=(1, 2, 3, 4, 5)):
    return parse_suite({"schema_version": 1, "name": "t", "entries": [
        {"op": "linear", "backend": "torch_ref", "dtype": "fp32", "modes": ["fwd", "bwd"],
         "grid": {"B": list(B), "L": 4, "I": 8, "O": 8}}]}, "t.yaml").cases


def _keys(cases):
    return [sc.case.key() for sc in cases]


@pytest.mark.parametrize("world", [1, 2, 3, 4, 7])
def test_shards_partition_the_filtered_cases(world):
    cases = _suite()
    every, _, _ = select(cases, "fwd")
    shards = [_keys(select(cases, "fwd", shard=(r, world))[0]) for r in range(world)]
    assert sorted(k for s in shards for k in s) == sorted(_keys(every))  # a partition: each case once
    assert max(map(len, shards)) - min(map(len, shards)) <= 1  # round robin: balanced counts
    for r, s in enumerate(shards):  # case i of the filtered list on rank i mod world
        assert s == [k for i, k in enumerate(_keys(every)) if shard_of(i, world) == r]


def test_a_case_stays_on_its_rank_whatever_is_finished():
    cases = _suite()
    full = _keys(select(cases, shard=(1, 3))[0])
    done = {full[0], _keys(cases)[0]}  # one of this rank's and one of another rank's
    rest = _keys(select(cases, skip_keys=done, shard=(1, 3))[0])
    assert rest == [k for k in full if k not in done]


def test_rank_device():
    assert rank_device("cuda", 3) == "cuda:3" and rank_device("cpu", 3) == "cpu"
    with pytest.raises(Exception, match="fixed GPU index"):
        rank_device("cuda:1", 0)


def _rank_run(out, rank, world, cases, **kw):
    cfg = SweepConfig(device="cpu", out_dir=Path(out), timing=FAST, shard=(rank, world),
                      distributed={"rank": rank, "world_size": world, "host": "h"}, **kw)
    return run_sweep(cases, cfg)


def test_rank_files_merge_into_the_single_process_case_set(tmp_path):
    cases = _suite()
    single = run_sweep(cases, SweepConfig(device="cpu", out_dir=tmp_path / "single", timing=FAST))
    for r in range(3):
        s = _rank_run(tmp_path / "d", r, 3, cases)
        assert s.path.name.startswith(f"rank{r}-")
    assert len(rank_files(tmp_path / "d")) == 3
    path, parts = merge_folder(tmp_path / "d")
    assert len(parts) == 3 and not rank_files(tmp_path / "d")  # parts removed: the merged file holds them
    rf = read_results(path)
    assert rf.complete and path.name.startswith("run-")
    assert sorted(c["key"] for c in rf.cases) == sorted(c["key"] for c in read_results(single.path).cases)
    ranks = rf.meta["distributed"]["ranks"]
    assert [r["rank"] for r in ranks] == [0, 1, 2] and all(r["device"]["name"] for r in ranks)
    assert {c["rank"] for c in rf.cases} == {0, 1, 2}
    assert all(shard_of(_keys(select(cases)[0]).index(c["key"]), 3) == c["rank"] for c in rf.cases)
    assert sum(r["cases"] for r in ranks) == len(rf.cases)


def test_merge_refuses_two_device_models(tmp_path):
    cases = _suite(B=(1, 2))
    a = read_results(_rank_run(tmp_path, 0, 2, cases).path)
    b = read_results(_rank_run(tmp_path, 1, 2, cases).path)
    b.meta["device"] = {**b.meta["device"], "name": "Some Other GPU"}
    with pytest.raises(Exception, match="different device models"):
        merge([Part.of(a), Part.of(b)], tmp_path / "m", how="test")


def test_a_cut_off_rank_file_merges_with_what_it_finished(tmp_path):
    cases = _suite()
    _rank_run(tmp_path, 0, 2, cases)
    s1 = _rank_run(tmp_path, 1, 2, cases)
    # rank 1 "died": its .jsonl with two finished cases and half a line
    doc = json.loads(s1.path.read_text())
    lines = [json.dumps({"record": "header", "schema_version": 1, "meta": doc["meta"], "timing": doc["timing"]})]
    lines += [json.dumps({"record": "case", **c}) for c in doc["cases"][:2]]
    s1.path.unlink()
    s1.path.with_suffix(".jsonl").write_text("\n".join(lines) + '\n{"record": "ca')
    path, _ = merge_folder(tmp_path, keep_parts=True)
    rf = read_results(path)
    assert sum(1 for c in rf.cases if c["rank"] == 1) == 2
    assert rf.meta["ended_early"]["ranks"][0]["rank"] == 1
    assert len(rank_files(tmp_path)) == 2  # kept


def _torchrun(out, world, *extra, port):
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONUNBUFFERED": "1"}
    return [sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", str(world),
            "--master-addr", "127.0.0.1", "--master-port", str(port), "-m", "ssmbench", "measure",
            "--suite", "cpu_smoke", "--device", "cpu", "--out", str(out), "--distributed", "--no-energy",
            *extra], env


def test_torchrun_gloo_two_ranks_equals_the_single_process_run(tmp_path):
    """torchrun, 2 ranks, gloo on the CPU: the merged file holds exactly the cases of a plain run."""
    filt = ["--filter", "silu", "--target-time", "0.002"]
    cmd, env = _torchrun(tmp_path / "d", 2, *filt, port=29631)
    done = subprocess.run(cmd, check=False, env=env, capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    files = read_dir(tmp_path / "d")
    assert len(files) == 1 and files[0].path.name.startswith("run-")
    merged = files[0]
    single, _, _ = select(load_suite("cpu_smoke").cases, "silu")
    assert sorted(c["key"] for c in merged.cases) == sorted(_keys(single))
    assert {c["rank"] for c in merged.cases} == {0, 1}
    dist = merged.meta["distributed"]
    assert dist["world_size"] == 2 and dist["backend"] == "gloo" and len(dist["ranks"]) == 2
    assert dist["cases_per_s"] > 0


def test_torchrun_a_killed_rank_loses_no_other_ranks_cases_and_resume_finishes(tmp_path):
    out = tmp_path / "d"
    filt = ["--filter", "/fwd/", "--target-time", "0.3"]  # ~0.3 s per case: time to kill mid-run
    cmd, env = _torchrun(out, 2, *filt, port=29641)
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd=tmp_path)
    killed = None
    try:
        deadline = time.monotonic() + 240
        while killed is None and time.monotonic() < deadline and proc.poll() is None:
            for f in out.glob("rank1-*.jsonl") if out.is_dir() else ():
                if len(f.read_text().splitlines()) >= 2:  # header + one finished case
                    killed = int(f.stem.rsplit("-", 1)[1])  # the worker's pid is in its file name
                    os.kill(killed, signal.SIGKILL)
                    break
            time.sleep(0.05)
        proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert killed is not None, "rank 1 never wrote a case"
    assert proc.returncode != 0  # torchrun reports the failed worker
    parts = {p.name.split("-")[0]: read_results(p) for p in rank_files(out)}
    assert set(parts) == {"rank0", "rank1"}  # nothing merged, both files kept
    assert all(not rf.complete for rf in parts.values())
    finished = {c["key"] for rf in parts.values() for c in rf.cases}
    assert len(parts["rank1"].cases) >= 1 and len(parts["rank0"].cases) >= 1
    # resume finishes the rest; the merged file of the resumed run holds only the new cases
    cmd, env = _torchrun(out, 2, *filt[:2], "--target-time", "0.002", "--resume", port=29651)
    done = subprocess.run(cmd, check=False, env=env, capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    every = set(_keys(select(load_suite("cpu_smoke").cases, "/fwd/")[0]))
    runs = [rf for rf in read_dir(out) if rf.path.name.startswith("run-")]
    assert len(runs) == 1
    new = {c["key"] for c in runs[0].cases}
    assert not new & finished and new | finished == every
    path, _ = merge_folder(out)  # the crashed run's rank files, merged after the fact
    assert {c["key"] for c in read_results(path).cases} == finished
