"""scripts/probe_spread.py on probe fragments written here: per device and key, the spread over the probe files and
whether the key is stable or moves; bad input exits 2 with one line."""

import json
import subprocess
import sys
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[1]


def _fragment(path: Path, device: str, eager_us: float, bandwidth: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump({"meta": {"device": {"name": device}}, "measured": [
        {"key": "launch.host.torch_eager", "value": f"{eager_us} us", "date": "2026-12-06", "method": "test"},
        {"key": "memory.dram.bandwidth", "value": bandwidth, "date": "2026-12-06", "method": "test"}]}))


def _run(*args):
    return subprocess.run([sys.executable, str(REPO / "scripts" / "probe_spread.py"), *map(str, args)],
                          capture_output=True, text=True, timeout=120, check=False)


def test_spread_per_device_and_key(tmp_path):
    _fragment(tmp_path / "a" / "probe-x.yaml", "GPU A", 6.0, "4.20 TB/s")
    _fragment(tmp_path / "b" / "probe-x.yaml", "GPU A", 12.0, "4.22 TB/s")
    _fragment(tmp_path / "c" / "probe-x.yaml", "GPU B", 7.0, "3.0 TB/s")
    (tmp_path / "c" / "probe-runtime-x.yaml").write_text("not a fragment of this kind")
    r = _run(tmp_path, "--json", tmp_path / "out.json")
    assert r.returncode == 0, r.stderr
    doc = json.loads((tmp_path / "out.json").read_text())
    a = {row["key"]: row for row in doc["devices"]["GPU A"]}
    assert a["launch.host.torch_eager"]["ratio"] == 2.0 and a["launch.host.torch_eager"]["label"] == "moves"
    assert a["memory.dram.bandwidth"]["label"] == "stable" and a["memory.dram.bandwidth"]["n"] == 2
    assert abs(a["launch.host.torch_eager"]["median"] - 9e-6) < 1e-12
    b = {row["key"]: row for row in doc["devices"]["GPU B"]}
    assert b["launch.host.torch_eager"]["n"] == 1 and b["launch.host.torch_eager"]["label"] is None
    assert doc["skipped"] == [str(tmp_path / "c" / "probe-runtime-x.yaml")] and "skipped:" in r.stdout
    assert "## GPU A (2 probe files)" in r.stdout and "| launch.host.torch_eager | 2 | 6 us | 9 us | 12 us | 2.00 | moves |" in r.stdout


def test_bad_input_exit_2(tmp_path):
    for args in ((tmp_path / "missing",), (tmp_path,)):
        r = _run(*args)
        assert r.returncode == 2 and "probe_spread:" in r.stderr and "Traceback" not in r.stderr
    _fragment(tmp_path / "probe-x.yaml", "GPU A", 6.0, "4.2 TB/s")
    r = _run(tmp_path, "--json", tmp_path)
    assert r.returncode == 2 and "is a folder" in r.stderr
