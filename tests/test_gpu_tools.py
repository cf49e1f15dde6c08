"""The GPU tooling around the backends: the extension build helper (measure/extensions.py) and
the ncu byte audit (measure/byte_audit.py). The device script: tests/test_scripts.py."""

from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


SETUP_PY = '''
from torch.utils.cpp_extension import CUDAExtension
def append_nvcc_threads(a): return a + ["--threads", "4"]
if HIP:
    extra_compile_args = {"cxx": ["-O3"], "nvcc": ["-O3", "--offload-arch=native"] + cc_flag}
else:
    extra_compile_args = {"cxx": ["-O3", "-std=c++17"],
                          "nvcc": append_nvcc_threads(["-O3", "--expt-relaxed-constexpr", "--use_fast_math"] + cc_flag)}
ext_modules.append(CUDAExtension(name="demo_cuda", sources=["csrc/a.cpp", "csrc/b.cu"],
                                 extra_compile_args=extra_compile_args, include_dirs=[Path(this_dir) / "csrc" / "inc"]))
'''


def test_parse_setup_reads_sources_and_cuda_flags():
    from ssmbench.measure.extensions import arch_flags, parse_setup

    spec = parse_setup(SETUP_PY, "demo_cuda")
    assert spec.sources == ["csrc/a.cpp", "csrc/b.cu"] and spec.include_dirs == ["csrc/inc"]
    assert spec.cxx_flags == ["-O3", "-std=c++17"]
    assert spec.nvcc_flags == ["-O3", "--expt-relaxed-constexpr", "--use_fast_math", "--threads", "4"]
    assert arch_flags("sm_90") == ["-gencode", "arch=compute_90,code=sm_90"]


@pytest.mark.parametrize("sdist,module,n_sources", [("mamba_ssm", "selective_scan_cuda", 10),
                                                     ("causal_conv1d", "causal_conv1d_cuda", 4)])
def test_parse_the_real_setup_py(tmp_path, sdist, module, n_sources):
    from ssmbench.measure.extensions import find_sdist, parse_setup, unpack

    if not list((REPO / ".sdist").glob(f"{sdist}-*.tar.gz")):
        pytest.skip(f"no {sdist} sdist in .sdist/ (downloaded by hand, never committed: docs/gpu_setup.md)")
    root = unpack(find_sdist(REPO / ".sdist", sdist), tmp_path)
    spec = parse_setup((root / "setup.py").read_text(), module)
    assert len(spec.sources) == n_sources and all((root / s).exists() for s in spec.sources)
    assert "--use_fast_math" in spec.nvcc_flags and not any("arch" in f for f in spec.nvcc_flags)


NCU_CSV = '''==PROF== Connected to process 123
"ID","Process ID","Process Name","Host Name","Kernel Name","Context","Stream","Block Size","Grid Size","Device","CC","Section Name","Metric Name","Metric Unit","Metric Value"
"0","123","python3","h","kernel_a(float*)","1","7","(128, 1, 1)","(64, 1, 1)","0","9.0","Command line profiler metrics","dram__bytes_read.sum","byte","1,048,576"
"0","123","python3","h","kernel_a(float*)","1","7","(128, 1, 1)","(64, 1, 1)","0","9.0","Command line profiler metrics","dram__bytes_write.sum","byte","524,288"
"1","123","python3","h","spin_kernel(long)","1","7","(1, 1, 1)","(1, 1, 1)","0","9.0","Command line profiler metrics","dram__bytes_read.sum","byte","0"
"2","123","python3","h","kernel_b","1","7","(1, 1, 1)","(1, 1, 1)","0","9.0","Command line profiler metrics","dram__bytes_read.sum","byte","100"
"3","123","python3","h","kernel_c","1","7","(1, 1, 1)","(1, 1, 1)","0","9.0","Command line profiler metrics","dram__bytes_read.sum","byte","20"
"4","123","python3","h","spin_kernel(long)","1","7","(1, 1, 1)","(1, 1, 1)","0","9.0","Command line profiler metrics","dram__bytes_read.sum","byte","0"
'''


def test_byte_audit_parses_ncu_csv_and_splits_cases():
    from ssmbench.measure.byte_audit import parse_ncu_csv, split_by_marker

    from ssmbench.errors import UserError

    kernels = parse_ncu_csv(NCU_CSV)
    assert [k["name"][:8] for k in kernels] == ["kernel_a", "spin_ker", "kernel_b", "kernel_c", "spin_ker"]
    assert kernels[0]["metrics"] == {"dram__bytes_read.sum": 1048576.0, "dram__bytes_write.sum": 524288.0}
    segs = split_by_marker(kernels, 2)
    assert [[k["name"] for k in s] for s in segs] == [["kernel_a(float*)"], ["kernel_b", "kernel_c"]]
    with pytest.raises(UserError):
        split_by_marker(kernels, 3)


def test_byte_audit_selects_kernel_cases_per_backend():
    from ssmbench.measure.byte_audit import select_cases

    cases = select_cases(str(REPO / "measure" / "suites" / "default_h200_a.yaml"), 2, ("fwd", "decode"))
    per = {}
    for c in cases:
        per[(c["backend"], c["op"])] = per.get((c["backend"], c["op"]), 0) + 1
        assert c["mode"] in ("fwd", "decode")
    assert max(per.values()) == 2 and ("mamba_ssm.selective_scan_cuda", "mamba1_scan") in per


def test_byte_audit_backend_patterns_select_and_exclude():
    from ssmbench.measure.byte_audit import backend_selected, select_cases

    assert backend_selected("torch.sdpa.flash", None)
    assert backend_selected("torch.sdpa.flash", ("torch*", "fla.*"))
    assert not backend_selected("mamba_ssm.selective_scan_cuda", ("torch*", "fla.*"))
    assert not backend_selected("torch.sdpa.flash", None, ("torch.sdpa.*",))
    suite = str(REPO / "measure" / "suites" / "default_h200_a.yaml")
    every = {c["backend"] for c in select_cases(suite, 1, ("fwd", "decode"))}
    no_ext = {c["backend"] for c in select_cases(suite, 1, ("fwd", "decode"), exclude=("mamba_ssm.*",))}
    only = {c["backend"] for c in select_cases(suite, 1, ("fwd", "decode"), backends=("mamba_ssm.*",))}
    assert only and no_ext and only | no_ext == every and not only & no_ext


def test_byte_audit_cli_rejects_an_existing_out_file(tmp_path, capsys):
    from ssmbench.measure.byte_audit import main

    out = tmp_path / "audit.json"
    out.write_text("{}")
    assert main(["--suite", str(REPO / "measure" / "suites" / "default_h200_a.yaml"), "--out", str(out)]) == 2
    assert "file exists" in capsys.readouterr().err and out.read_text() == "{}"


# ncu's CSV with sections beside the --metrics values (NCU_CSV's header): one row per (kernel, metric), the launch
# shape and the section on every row
_SCAN_ROW = '"0","1","python3","h","_chunk_scan_fwd_kernel","1","7","(128, 1, 1)","(4, 128, 24)","0","9.0",'
NCU_SECTION_CSV = "\n".join([NCU_CSV.splitlines()[1]] + [_SCAN_ROW + row for row in (
    '"Command line profiler metrics","dram__bytes_read.sum","byte","1,048,576"',
    '"GPU Speed Of Light Throughput","Duration","nsecond","303,100"',
    '"Occupancy","Achieved Occupancy","%","21.5"',
    '"Occupancy","Block Limit Registers","block","n/a"')]) + "\n"


def test_byte_audit_reads_sections_per_kernel_with_the_launch_shape():
    from ssmbench.measure.byte_audit import ncu_command, parse_ncu_csv

    [k] = parse_ncu_csv(NCU_SECTION_CSV)
    assert k["block"] == "(128, 1, 1)" and k["grid"] == "(4, 128, 24)"
    assert k["metrics"] == {"dram__bytes_read.sum": 1048576.0, "GPU Speed Of Light Throughput: Duration": 303100.0,
                            "Occupancy: Achieved Occupancy": 21.5, "Occupancy: Block Limit Registers": None}
    cmd = ncu_command("ncu", Path("log.csv"), Path("cases.json"), Path("side.json"), ("SpeedOfLight", "Occupancy"))
    assert cmd[cmd.index("--metrics") + 2:cmd.index("--csv")] == ["--section", "SpeedOfLight", "--section", "Occupancy"]


def test_byte_audit_metrics_expand_sets_after_the_byte_metrics_without_repeats():
    from ssmbench.measure.byte_audit import (
        METRIC_SETS,
        METRICS,
        metrics_of,
        ncu_command,
    )

    extra = metrics_of("pipes_stalls, lts__t_sectors_op_atom.sum, dram__bytes_read.sum, sm__cycles_elapsed.avg")
    assert extra == (*METRIC_SETS["pipes_stalls"], "sm__cycles_elapsed.avg")
    assert "smsp__average_warps_issue_stalled_barrier_per_issue_active.ratio" in extra
    cmd = ncu_command("ncu", Path("log.csv"), Path("cases.json"), Path("side.json"), (), extra)
    assert cmd[cmd.index("--metrics") + 1].split(",") == [*METRICS, *extra]


@pytest.mark.parametrize("args, message", [
    (["--sections", "SpeedOfLight,Roofline"], "Roofline not an ncu section"),
    (["--out", "no/such/dir/audit.json"], "no such folder"),
    (["--metrics", "pipes_stalls,Stall-Reasons"], "'Stall-Reasons' is neither a metric set"),
])
def test_byte_audit_cli_rejects_unknown_sections_and_output_folders(tmp_path, capsys, monkeypatch, args, message):
    from ssmbench.measure.byte_audit import main

    monkeypatch.chdir(tmp_path)
    argv = ["--suite", str(REPO / "measure" / "suites" / "default_h200_a.yaml"), "--out", "audit.json", *args]
    assert main(argv) == 2
    assert message in capsys.readouterr().err and not (tmp_path / "audit.json").exists()
