"""Result files: versioned, never overwritten, incremental; the reader's checks."""

import json

import pytest
from ssmbench.measure.results import (
    SCHEMA_VERSION,
    ResultsError,
    ResultWriter,
    finished_keys,
    jsonable,
    latest_by_key,
    read_dir,
    read_results,
    result_files,
)

from ssmbench.errors import UserError


def _rec(key="linear/cublas/x/fp32/fwd/B=1", status="ok", **kw):
    return {"op": "linear", "impl": "cublas", "backend": "x", "dims": {"B": 1}, "dtype": "fp32", "mode": "fwd",
            "key": key, "status": status, **kw}


def test_writer_incremental_then_consolidated(tmp_path):
    w = ResultWriter(tmp_path, {"seed": 0}, {"target_s": 1.0})
    w.add(_rec("a", median=float("nan")))
    # already on disk, readable, before finish
    rf = read_results(w.jsonl_path)
    assert [c["key"] for c in rf.cases] == ["a"] and not rf.complete
    assert rf.cases[0]["median"] is None  # NaN is written as null (JSON has no NaN)
    w.add(_rec("b", status="unavailable"))
    path = w.finish({"finished_utc": "now"})
    assert not w.jsonl_path.exists()
    rf = read_results(path)
    assert rf.complete and rf.meta["finished_utc"] == "now" and [c["key"] for c in rf.cases] == ["a", "b"]
    assert json.loads(path.read_text())["schema_version"] == SCHEMA_VERSION


def test_writer_never_overwrites(tmp_path):
    w1 = ResultWriter(tmp_path, {}, {})
    w2 = ResultWriter(tmp_path, {}, {})  # same second, same pid: must get another name
    assert w1.jsonl_path != w2.jsonl_path
    p1, p2 = w1.finish(), w2.finish()
    assert p1 != p2 and p1.exists() and p2.exists()


def test_writer_rejects_unknown_status(tmp_path):
    w = ResultWriter(tmp_path, {}, {})
    with pytest.raises(ValueError, match="status"):
        w.add(_rec(status="fine"))


@pytest.mark.parametrize("doc, words", [
    ({"schema_version": 2, "meta": {}, "timing": {}, "cases": []}, ["schema_version 2 is not supported", "1"]),
    ({"meta": {}, "timing": {}, "cases": []}, ["no 'schema_version'"]),
    ({"schema_version": "1", "meta": {}, "timing": {}, "cases": []}, ["schema_version '1'"]),
    ([1, 2], ["top level"]),
    ({"schema_version": 1, "meta": {}, "timing": {}}, ["missing top-level key 'cases'"]),
    ({"schema_version": 1, "meta": {}, "timing": {}, "cases": [{"key": "k"}]}, ["cases[0] lacks field"]),
    ({"schema_version": 1, "meta": {}, "timing": {}, "cases": [_rec(status="great")]}, ["status 'great'"]),
])
def test_reader_rejects_bad_files(tmp_path, doc, words):
    p = tmp_path / "r.json"
    p.write_text(json.dumps(doc))
    with pytest.raises(ResultsError) as exc:
        read_results(p)
    assert str(exc.value).startswith(str(p))
    for w in words:
        assert w in str(exc.value)


def test_reader_malformed_and_missing(tmp_path):
    p = tmp_path / "r.json"
    p.write_text('{"schema_version": 1, "cases": [')
    with pytest.raises(ResultsError, match="not valid JSON"):
        read_results(p)
    with pytest.raises(ResultsError, match="file not found"):
        read_results(tmp_path / "none.json")
    q = tmp_path / "r.csv"
    q.write_text("a,b")
    with pytest.raises(ResultsError, match=".json or .jsonl"):
        read_results(q)


def test_jsonl_cut_last_line_is_dropped_but_a_bad_middle_line_is_an_error(tmp_path):
    head = json.dumps({"record": "header", "schema_version": 1, "meta": {}, "timing": {}})
    good = json.dumps({"record": "case", **_rec("a")})
    p = tmp_path / "run.jsonl"
    p.write_text(head + "\n" + good + "\n" + good[:20])  # killed while writing the third line
    rf = read_results(p)
    assert [c["key"] for c in rf.cases] == ["a"] and "cut off" in rf.notes[0]
    p.write_text(head + "\n" + good[:20] + "\n" + good + "\n")
    with pytest.raises(ResultsError, match="line 2 is not valid JSON"):
        read_results(p)
    p.write_text(json.dumps({"record": "header", "schema_version": 7}) + "\n")
    with pytest.raises(ResultsError, match="schema_version 7"):
        read_results(p)
    p.write_text(good + "\n")
    with pytest.raises(ResultsError, match="header"):
        read_results(p)


def test_dir_reading_finished_keys_and_latest(tmp_path):
    w = ResultWriter(tmp_path, {}, {})
    w.add(_rec("a", value=1))
    w.add(_rec("b", status="error"))
    w.finish()
    w2 = ResultWriter(tmp_path, {}, {})
    w2.add(_rec("a", value=2))
    w2.close()  # interrupted run: stays .jsonl
    assert len(result_files(tmp_path)) == 2
    assert finished_keys(tmp_path).keys == {"a"}  # 'error' is not finished
    latest = latest_by_key(read_dir(tmp_path))
    assert latest["a"]["value"] == 2


def test_resume_folder_may_hold_other_json_files(tmp_path):
    """A run folder keeps build and check records beside its runs (scripts/device_fa3.sh's
    fa3_build.json): resuming from it reads the runs and passes over the rest; a damaged run file is
    still an error."""
    w = ResultWriter(tmp_path, {}, {})
    w.add(_rec("a", value=1))
    w.finish()
    (tmp_path / "fa3_build.json").write_text(json.dumps({"status": "prebuilt", "stage": "done", "meta": {}}))
    assert finished_keys(tmp_path).keys == {"a"}
    runs = read_dir(tmp_path)
    assert len(runs) == 1 and runs[0].path.name.startswith("run-") and runs[0].cases[0]["key"] == "a"
    (tmp_path / "run-broken.json").write_text("{not json")
    with pytest.raises(ResultsError, match="run-broken"):
        read_dir(tmp_path)


def test_jsonable():
    np = pytest.importorskip("numpy")
    assert jsonable({"a": np.float64(1.5), "b": np.int64(3), "c": float("inf"), "d": (1, 2)}) == \
        {"a": 1.5, "b": 3, "c": None, "d": [1, 2]}
    with pytest.raises(TypeError):
        jsonable(object())


def test_result_files_order_by_timestamp_then_collision_index(tmp_path):
    names = ["run-20261202T000001.000000Z-7.json", "run-20261202T000000.000000Z-9-1.jsonl",
             "run-20261202T000000.000000Z-9.json"]
    for n in names:
        (tmp_path / n).write_text("{}")
    assert [p.name for p in result_files(tmp_path)] == [names[2], names[1], names[0]]


def test_finished_keys_count_only_files_of_the_same_device(tmp_path):
    h200, h100 = tmp_path / "h200", tmp_path / "h100"
    for d, name, key in ((h200, "NVIDIA H200", "a"), (h100, "NVIDIA H100 80GB HBM3", "b")):
        w = ResultWriter(d, {"device": {"name": name}}, {})
        w.add(_rec(key))
        w.finish()
    both = finished_keys([h200, h100])
    assert both.keys == {"a", "b"} and both.other_device == {}
    only = finished_keys([h200, h100], device="NVIDIA H200")
    assert only.keys == {"a"}
    assert list(only.other_device.values()) == ["NVIDIA H100 80GB HBM3"]
    assert only.files == [str(result_files(h200)[0])]
    assert only.to_dict()["ignored_other_device"] == only.other_device


def test_records_are_typed_and_a_malformed_identity_names_the_file(tmp_path):
    from ssmbench.analytic.cases import Case

    w = ResultWriter(tmp_path, {"device": {"name": " NVIDIA H200 "}}, {})
    w.add(_rec("a", time_s={"median": 1e-3}, started_utc="2026-12-02T10:00:00Z"))
    w.add({**_rec("bad"), "dims": {"B": 0}})
    rf = read_results(w.finish())
    assert len(rf.sha256) == 64 and rf.device == "NVIDIA H200"  # measured_on strips the name
    good, bad = rf.records
    assert good.case == Case("linear", "cublas", "x", {"B": 1}, "fp32", "fwd")
    assert (good.status, good.time_s, good.started_utc, good.index) == ("ok", {"median": 1e-3},
                                                                          "2026-12-02T10:00:00Z", 0)
    assert good["time_s"] == {"median": 1e-3} and dict(good) == rf.cases[0]  # the stored fields, as stored
    with pytest.raises(ResultsError, match=r"run-.*\.json: cases\[1\] \(bad\): .*dimension B"):
        bad.case
    w = ResultWriter(tmp_path / "nameless", {}, {})
    w.add(_rec("a"))
    with pytest.raises(UserError, match="names no device"):
        read_results(w.finish()).device


def _history(tmp_path):
    """Records of four cases over three runs on one device, and one run on another device."""
    base = dict(op="rmsnorm", impl="torch_eager", backend="torch_ref", dtype="bf16", mode="fwd")

    def rec(L, status, t):
        key = f"rmsnorm/torch_eager/torch_ref/bf16/fwd/B=1,D=1024,L={L}"
        return {**base, "dims": {"B": 1, "L": L, "D": 1024}, "key": key, "status": status,
                "reason": None if status == "ok" else f"{status} at {t}",
                "time_s": {"median": 1e-5 * L / 128} if status == "ok" else None, "started_utc": t}

    runs = [("NVIDIA H200", [rec(128, "timeout", "T1"), rec(256, "ok", "T1"), rec(512, "error", "T1")]),
            ("NVIDIA H200", [rec(128, "ok", "T2"), rec(256, "unavailable", "T2"), rec(1024, "failed_check", "T3")]),
            # an older record in a later file: started_utc decides, not the file order
            ("NVIDIA H200", [rec(1024, "oom", "T0"), rec(512, "error", "T2")]),
            ("NVIDIA H100 80GB HBM3", [rec(512, "ok", "T9")])]
    paths = []
    for i, (dev, recs) in enumerate(runs):
        w = ResultWriter(tmp_path / f"d{i}", {"device": {"type": "cuda", "name": dev}}, {})
        for r in recs:
            w.add(r)
        paths.append(w.finish())
    return paths


def test_resume_and_calibration_use_one_latest_rule(tmp_path):
    import ssmbench.calibrate.join as join_mod
    from ssmbench.calibrate.sources import load_results
    from ssmbench.hwspecs import get_spec
    from ssmbench.measure import results as results_mod

    assert join_mod.latest_by_key is results_mod.latest_by_key
    paths = _history(tmp_path)
    files = [read_results(p) for p in paths]
    latest = latest_by_key(files, device="NVIDIA H200")
    assert {k.split("L=")[1]: (r.status, r.started_utc) for k, r in latest.items()} == {
        "128": ("ok", "T2"), "256": ("unavailable", "T2"), "512": ("error", "T2"), "1024": ("failed_check", "T3")}
    # resume: a case is finished when it has a finished record on this device (the latest finished one)
    resumed = finished_keys([p.parent for p in paths], device="NVIDIA H200")
    assert resumed.keys == set(latest_by_key(files, device="NVIDIA H200", statuses=results_mod.FINISHED))
    assert {k.split("L=")[1] for k in resumed.keys} == {"128", "256", "1024"}
    # calibration: every record that is not ok and not the latest of its case on its device is superseded,
    # and names the latest record; the latest non-ok records are exclusions with their own status
    joined = join_mod.join(load_results(paths[:3]), get_spec("h200-sxm"))
    superseded = sorted((e["key"].split("L=")[1], e["reason"]) for e in joined.excluded if e["status"] == "superseded")
    expected = []
    for rf in files[:3]:
        for r in rf.records:
            last = latest[r.key]
            if r.status != "ok" and (last.path, last.index) != (r.path, r.index):
                expected.append((r.key.split("L=")[1], f"a later record of this case on NVIDIA H200 replaces it "
                                                       f"({last.path}: cases[{last.index}])"))
    assert superseded == sorted(expected) and len(expected) == 3  # 128 timeout, 512 error T1, 1024 oom T0
    others = {e["key"].split("L=")[1]: e["status"] for e in joined.excluded if e["status"] != "superseded"}
    assert others == {k.split("L=")[1]: r.status for k, r in latest.items() if r.status != "ok"}
    assert sorted(c.key.split("L=")[1] for c in joined.cases) == ["128", "256"]
