"""Install the GPU kernel libraries from their source distributions and compile their CUDA extensions
for one architecture, with no network.

mamba-ssm and causal-conv1d publish only source distributions; their ``setup.py`` compiles the CUDA
extension for about ten architectures (minutes each) or downloads a prebuilt wheel (no network on the
GPU machine). This module does the two halves separately (docs/gpu_setup.md):

1. ``install``: unpack the sdists (``*.tar.gz`` in ``--sdist-dir``) and ``pip install --no-deps
   --no-build-isolation --no-index --target DIR`` the unpacked folders (plus any ``*.whl`` in
   ``--wheel-dir``) with ``MAMBA_SKIP_CUDA_BUILD=TRUE MAMBA_FORCE_BUILD=TRUE
   CAUSAL_CONV1D_SKIP_CUDA_BUILD=TRUE``: the Python packages without compiling anything
   (FORCE_BUILD stops setup.py from trying to download a prebuilt wheel).
2. ``build``: compile ``selective_scan_cuda`` (mamba-ssm ``csrc/selective_scan``) and/or
   ``causal_conv1d_cuda`` (causal-conv1d ``csrc``) with ``torch.utils.cpp_extension.load`` for ONE
   architecture (``--arch 90`` -> ``-gencode arch=compute_90,code=sm_90``). The sources, include
   folders and the nvcc / C++ flags are read from each sdist's own ``setup.py`` (its ``CUDAExtension``
   call and the CUDA branch of ``extra_compile_args``), so the build matches the published one
   except for the architecture list. ``MAX_JOBS`` (``--jobs``) sets ninja's parallelism. Each
   build writes ``<build-dir>/<module>.status.json`` (state building / done / failed, seconds, flags,
   error) and ``<module>.log``; the kernel backends read the status file (``SSMBENCH_EXT_BUILD_DIR``)
   and wait for a build in progress. ``--background`` starts each build as its own process and
   returns at once, so that a sweep can measure the cases that need no extension meanwhile.

The kernel backends import extensions through ``ensure_extension`` (below): it waits for a build in
progress (status file), then imports from the build folder; ``import_mamba_ssm`` and
``bind_causal_conv1d`` do the same for mamba-ssm and its causal-conv1d bindings.

After a build in this process, ``sys.path_importer_cache`` is cleared and ``importlib.invalidate_caches()``
called: a folder that was on ``sys.path`` before it held the module is otherwise cached as not
holding it. Measured on an H200 machine (16 cores): selective_scan_cuda ~131-159 s, causal_conv1d_cuda
~369 s (its backward file dominates), sm_90 only (shared/GPU.md).

Usage (repository root):
  python -m ssmbench.measure.extensions install --sdist-dir .sdist --wheel-dir .whl --target /tmp/site
  python -m ssmbench.measure.extensions build --sdist-dir .sdist --build-dir /tmp/ext \
      --ext selective_scan_cuda causal_conv1d_cuda --arch 90 --jobs 16 --background
"""

from __future__ import annotations

import argparse
import ast
import importlib
import json
import os
import shutil
import subprocess
import sys
import tarfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import UserError

# *_FORCE_BUILD stops each setup.py from trying to download a prebuilt wheel (no network there).
SKIP_ENV = {"MAMBA_SKIP_CUDA_BUILD": "TRUE", "MAMBA_FORCE_BUILD": "TRUE", "CAUSAL_CONV1D_SKIP_CUDA_BUILD": "TRUE",
            "CAUSAL_CONV1D_FORCE_BUILD": "TRUE",
            "FLASH_ATTENTION_SKIP_CUDA_BUILD": "TRUE"}
# extension module -> the sdist (distribution name prefix of the tarball) that holds its sources
EXTENSIONS = {"selective_scan_cuda": "mamba_ssm", "causal_conv1d_cuda": "causal_conv1d"}


def _unavailable(message: str) -> Exception:
    """The backends' ``Unavailable`` (imported here, not at module level: the backend modules import
    this one, and the backends package imports every backend module)."""
    from .backends.base import Unavailable

    return Unavailable(message)


def import_or_unavailable(module: str, hint: str):
    """Import ``module`` or raise the backends' ``Unavailable`` with the reason and ``hint``."""
    try:
        return importlib.import_module(module)
    except Exception as e:  # ImportError, but also e.g. a CUDA extension failing to load
        raise _unavailable(f"cannot import {module} ({type(e).__name__}: {e}); {hint}") from None


BUILD_DIR_ENV = "SSMBENCH_EXT_BUILD_DIR"  # where this module's ``build`` builds and writes status files
WAIT_ENV = "SSMBENCH_EXT_WAIT_S"  # how long a backend waits for a build in progress (default 900 s)
BUILD_HINT = "build it with `python -m ssmbench.measure.extensions` (docs/gpu_setup.md)"


def _build_status(module: str) -> dict | None:
    import json
    import os

    d = os.environ.get(BUILD_DIR_ENV)
    if not d:
        return None
    p = os.path.join(d, f"{module}.status.json")
    try:
        with open(p, encoding="utf-8") as fh:
            return json.load(fh)
    except (OSError, ValueError):
        return None


def _import_extension(module: str):
    """Import ``module`` if it is a compiled extension; None if it is missing or is a folder of that name
    (a folder on ``sys.path`` named like the module imports as a namespace package, which has no
    ``__file__`` and none of the extension's functions: the cause of "module 'selective_scan_cuda' has
    no attribute 'fwd'" on 2026-12-03). A namespace package is dropped from ``sys.modules``."""
    import sys

    try:
        m = importlib.import_module(module)
    except ImportError:
        return None
    if getattr(m, "__file__", None) is None:
        sys.modules.pop(module, None)
        return None
    return m


# Modules that bind a compiled extension at import (``import selective_scan_cuda``): if one was imported
# before the build finished it holds whatever stood in for the extension then, and is given the real one.
EXTENSION_BINDINGS = {"selective_scan_cuda": ("mamba_ssm.ops.selective_scan_interface",)}


def _rebind(module: str, ext) -> None:
    import sys

    for name in EXTENSION_BINDINGS.get(module, ()):
        m = sys.modules.get(name)
        if m is not None and getattr(m, module, None) is not ext:
            setattr(m, module, ext)


def ensure_extension(module: str, wait: bool = True):
    """Import a compiled extension (``selective_scan_cuda``, ``causal_conv1d_cuda``), never a half-built one.

    If ``$SSMBENCH_EXT_BUILD_DIR`` holds a status file saying that ``build`` (below) is building it,
    wait for that build first (so that a sweep can start with the cases that need no extension while
    the compiler runs), even if something of that name imports already; then put the build folder on
    ``sys.path`` and clear the import caches (a folder already on the path when it held no module is
    cached as holding none). Modules that bound the extension at import get the real one
    (``EXTENSION_BINDINGS``)."""
    import os
    import sys
    import time

    status = _build_status(module)
    deadline = time.monotonic() + float(os.environ.get(WAIT_ENV, "900"))
    while wait and status is not None and status.get("state") == "building" and time.monotonic() < deadline:
        time.sleep(2.0)
        status = _build_status(module)
    if status is not None and status.get("state") == "building":
        raise _unavailable(f"{module} is still being built (status file in ${BUILD_DIR_ENV}); not imported half-built")
    ext = _import_extension(module)
    if ext is None:
        if status is None:
            raise _unavailable(f"cannot import {module} (no compiled module of that name on sys.path); {BUILD_HINT}")
        if status.get("state") != "done":
            tail = str(status.get("error") or "")[-600:]
            raise _unavailable(f"{module} is not importable and its build is {status.get('state')}"
                               f"{': ' + tail if tail else ''}")
        build_dir = os.environ[BUILD_DIR_ENV]
        if build_dir not in sys.path:
            sys.path.insert(0, build_dir)
        sys.path_importer_cache.clear()
        importlib.invalidate_caches()
        ext = _import_extension(module)
        if ext is None:
            raise _unavailable(f"{module} was built in {build_dir} but does not import as a compiled module")
    _rebind(module, ext)
    return ext


def import_mamba_ssm(module: str):
    """Import a ``mamba_ssm`` module. Its package ``__init__`` imports ``selective_scan_cuda`` even for
    the Triton-only ops: wait for that build if it is in progress."""
    ensure_extension("selective_scan_cuda")
    return import_or_unavailable(module, "install mamba-ssm 2.3.x from its sdist (docs/gpu_setup.md)")


# mamba-ssm modules bind causal-conv1d's functions at import (None when it is missing); the names each binds
CONV_BINDINGS = {
    "mamba_ssm.ops.selective_scan_interface": ("causal_conv1d_fn", "causal_conv1d_fwd_function",
                                               "causal_conv1d_bwd_function", "causal_conv1d_update_function"),
    "mamba_ssm.ops.triton.ssd_combined": ("causal_conv1d_fn", "causal_conv1d_fwd_function",
                                          "causal_conv1d_bwd_function", "causal_conv1d_update_function"),
    "mamba_ssm.modules.mamba_simple": ("causal_conv1d_fn", "causal_conv1d_update"),
    "mamba_ssm.modules.mamba2": ("causal_conv1d_fn", "causal_conv1d_update", "causal_conv1d_varlen_states"),
    "mamba_ssm.modules.mha": ("causal_conv1d_fn", "causal_conv1d_update"),
}


def bind_causal_conv1d() -> None:
    """Wait for causal_conv1d_cuda, then give mamba-ssm modules imported before it existed the
    functions they would have bound had it been there at import (only names still ``None``): the
    same result as importing mamba-ssm after the build, without restarting the process."""
    import sys

    ensure_extension("causal_conv1d_cuda")
    hint = "install causal-conv1d 1.x from its sdist (docs/gpu_setup.md)"
    source = {}
    for mod, names in (("causal_conv1d", ("causal_conv1d_fn", "causal_conv1d_update")),
                       ("causal_conv1d.cpp_functions", ("causal_conv1d_fwd_function", "causal_conv1d_bwd_function",
                                                        "causal_conv1d_update_function")),
                       ("causal_conv1d.causal_conv1d_varlen", ("causal_conv1d_varlen_states",))):
        m = import_or_unavailable(mod, hint)
        source.update({n: getattr(m, n) for n in names})
    for mod, names in CONV_BINDINGS.items():
        m = sys.modules.get(mod)
        for n in names if m is not None else ():
            if getattr(m, n, None) is None:
                setattr(m, n, source[n])


@dataclass
class ExtensionSpec:
    """What a setup.py says about one CUDAExtension (paths relative to the sdist root)."""

    name: str
    sources: list[str]
    include_dirs: list[str]
    cxx_flags: list[str]
    nvcc_flags: list[str]  # without the architecture list (setup.py's cc_flag), which we choose
    notes: list[str] = field(default_factory=list)


def _strings(node) -> list[str]:
    """String constants of a list display, or of ``[...] + x`` / ``f([...])`` around one."""
    if isinstance(node, ast.List):
        return [e.value for e in node.elts if isinstance(e, ast.Constant) and isinstance(e.value, str)]
    if isinstance(node, ast.BinOp):
        return _strings(node.left) + _strings(node.right)
    if isinstance(node, ast.Call) and node.args:
        return _strings(node.args[0])
    return []


def _include_dir(node) -> str | None:
    """``Path(this_dir) / "csrc" / "x"`` -> "csrc/x"."""
    parts = []
    while isinstance(node, ast.BinOp) and isinstance(node.op, ast.Div):
        if isinstance(node.right, ast.Constant):
            parts.append(node.right.value)
        node = node.left
    return "/".join(reversed(parts)) if parts else None


def parse_setup(text: str, module: str) -> ExtensionSpec:
    """Read the CUDAExtension ``module`` and its CUDA compile flags from a setup.py's source."""
    tree = ast.parse(text)
    ext_call = None
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "CUDAExtension":
            kw = {k.arg: k.value for k in node.keywords}
            if isinstance(kw.get("name"), ast.Constant) and kw["name"].value == module:
                ext_call = kw
    if ext_call is None:
        raise UserError(f"setup.py has no CUDAExtension(name={module!r})")
    sources = _strings(ext_call["sources"])
    includes = [d for d in (_include_dir(e) for e in getattr(ext_call.get("include_dirs"), "elts", [])) if d]
    # The CUDA (not HIP) extra_compile_args: the dict whose nvcc list has --expt-relaxed-constexpr.
    cxx, nvcc, threads = None, None, False
    for node in ast.walk(tree):
        if isinstance(node, ast.Dict):
            keys = [k.value for k in node.keys if isinstance(k, ast.Constant)]
            if "cxx" in keys and "nvcc" in keys:
                vals = dict(zip(keys, node.values))
                flags = _strings(vals["nvcc"])
                if "--expt-relaxed-constexpr" in flags:
                    cxx, nvcc = _strings(vals["cxx"]), flags
                    threads = isinstance(vals["nvcc"], ast.Call) and getattr(vals["nvcc"].func, "id", "") == \
                        "append_nvcc_threads"
    if nvcc is None:
        raise UserError("setup.py: no CUDA extra_compile_args (a dict with 'cxx' and 'nvcc' keys) found")
    notes = []
    if threads:
        # append_nvcc_threads adds "--threads 4": parallel over the gencode targets; one target here
        nvcc = nvcc + ["--threads", "4"]
        notes.append("--threads 4 from append_nvcc_threads")
    return ExtensionSpec(module, sources, includes, cxx, nvcc, notes)


def arch_flags(arch: str) -> list[str]:
    a = arch.replace("sm_", "").replace(".", "")
    if not a.isdigit():
        raise UserError(f"--arch {arch!r}: expected a compute capability like 90 or sm_90")
    return ["-gencode", f"arch=compute_{a},code=sm_{a}"]


def find_sdist(sdist_dir: Path, prefix: str) -> Path:
    hits = sorted(sdist_dir.glob(f"{prefix}-*.tar.gz"))
    if not hits:
        have = ", ".join(p.name for p in sdist_dir.glob("*.tar.gz")) or "none"
        raise UserError(f"no {prefix}-*.tar.gz in {sdist_dir} (have: {have}); see docs/gpu_setup.md")
    return hits[-1]


def unpack(tarball: Path, into: Path) -> Path:
    """Unpack an sdist once; returns its root folder (``name-version``)."""
    root = into / tarball.name[: -len(".tar.gz")]
    if not (root / "setup.py").exists() and not (root / "pyproject.toml").exists():
        into.mkdir(parents=True, exist_ok=True)
        with tarfile.open(tarball) as tf:
            tf.extractall(into, filter="data")
    return root


def install(sdist_dir: Path, wheel_dir: Path | None, target: Path, work: Path) -> float:
    """pip-install the wheels in ``wheel_dir`` (one pip call), then the Python parts of every sdist
    without compiling (another), so that a wheel that does not fit the machine does not stop the
    kernel libraries; returns seconds. Raises if either call fails (after trying both)."""
    dirs = [str(unpack(t, work)) for t in sorted(sdist_dir.glob("*.tar.gz"))]
    wheels = sorted(str(w) for w in wheel_dir.glob("*.whl")) if wheel_dir and wheel_dir.exists() else []
    if not dirs and not wheels:
        raise UserError(f"nothing to install: no *.tar.gz in {sdist_dir} and no *.whl in {wheel_dir}")
    base = [sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-build-isolation", "--no-index",
            "--no-cache-dir", "--upgrade", "--target", str(target)]
    t0 = time.perf_counter()
    failed = []
    for what, items in (("wheels", wheels), ("sdists", dirs)):
        if items and subprocess.run(base + items, env={**os.environ, **SKIP_ENV}).returncode != 0:
            failed.append(what)
    if failed:
        raise UserError(f"pip install of the {' and '.join(failed)} failed (see the pip output above)")
    return time.perf_counter() - t0


def _write_status(build_dir: Path, module: str, **fields) -> None:
    p = build_dir / f"{module}.status.json"
    tmp = p.with_suffix(".tmp")
    tmp.write_text(json.dumps({"module": module, **fields}, indent=1))
    tmp.replace(p)  # atomic: a reader never sees half a file


def build(module: str, sdist_dir: Path, build_dir: Path, arch: str, jobs: int, work: Path) -> float:
    """Compile one extension in this process (torch.utils.cpp_extension.load); returns seconds."""
    if module not in EXTENSIONS:
        raise UserError(f"unknown extension {module!r}; known: {', '.join(EXTENSIONS)}")
    build_dir.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    started = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    _write_status(build_dir, module, state="building", started_utc=started, arch=arch)
    try:
        root = unpack(find_sdist(sdist_dir, EXTENSIONS[module]), work)
        spec = parse_setup((root / "setup.py").read_text(encoding="utf-8"), module)
        nvcc = spec.nvcc_flags + arch_flags(arch)
        os.environ["MAX_JOBS"] = str(jobs)
        from torch.utils.cpp_extension import load

        # each extension in its own folder (cpp_extension writes build.ninja there: two builds at once
        # must not share it); the finished .so is then moved into build_dir atomically. The folder's
        # name must not be the module's: build_dir is on sys.path, and a folder named selective_scan_cuda
        # would import as an empty namespace package while the compiler runs.
        own = build_dir / f"{module}.build"
        own.mkdir(exist_ok=True)
        load(name=module, sources=[str(root / s) for s in spec.sources], extra_cflags=spec.cxx_flags,
             extra_cuda_cflags=nvcc, extra_include_paths=[str(root / d) for d in spec.include_dirs],
             build_directory=str(own), verbose=True)
        tmp = build_dir / f".{module}.so.tmp"
        shutil.copy2(own / f"{module}.so", tmp)
        tmp.replace(build_dir / f"{module}.so")
    except BaseException as exc:
        _write_status(build_dir, module, state="failed", started_utc=started, arch=arch,
                      seconds=time.perf_counter() - t0, error=f"{type(exc).__name__}: {exc}"[-2000:])
        raise
    secs = time.perf_counter() - t0
    _write_status(build_dir, module, state="done", started_utc=started, arch=arch, seconds=secs,
                  sources=spec.sources, nvcc_flags=nvcc, cxx_flags=spec.cxx_flags, notes=spec.notes)
    if str(build_dir) not in sys.path:
        sys.path.insert(0, str(build_dir))
    sys.path_importer_cache.clear()
    importlib.invalidate_caches()
    return secs


def start_background(module: str, args: argparse.Namespace) -> subprocess.Popen:
    """Run ``build`` for one module in its own process, output to <build-dir>/<module>.log."""
    build_dir = Path(args.build_dir)
    build_dir.mkdir(parents=True, exist_ok=True)
    _write_status(build_dir, module, state="building", arch=args.arch, note="queued in the background")
    log = open(build_dir / f"{module}.log", "w")
    cmd = [sys.executable, "-m", "ssmbench.measure.extensions", "build", "--ext", module,
           "--sdist-dir", args.sdist_dir, "--build-dir", args.build_dir, "--arch", args.arch,
           "--jobs", str(args.jobs), "--work", args.work]
    return subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, start_new_session=False)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m ssmbench.measure.extensions", description=__doc__.split("\n")[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    pi = sub.add_parser("install", help="pip-install the Python parts of the sdists (no compiling)")
    pi.add_argument("--sdist-dir", default=".sdist")
    pi.add_argument("--wheel-dir", default=".whl")
    pi.add_argument("--target", required=True, help="folder to install into (put it on PYTHONPATH)")
    pi.add_argument("--work", default="/tmp/ssmbench_src", help="where the sdists are unpacked")
    pb = sub.add_parser("build", help="compile CUDA extensions for one architecture")
    pb.add_argument("--ext", nargs="+", default=list(EXTENSIONS), choices=list(EXTENSIONS))
    pb.add_argument("--sdist-dir", default=".sdist")
    pb.add_argument("--build-dir", required=True, help="build folder; the .so lands here (put it on PYTHONPATH)")
    pb.add_argument("--arch", default="90", help="compute capability, e.g. 90 (H100/H200)")
    pb.add_argument("--jobs", type=int, default=os.cpu_count() or 4, help="MAX_JOBS for ninja")
    pb.add_argument("--work", default="/tmp/ssmbench_src", help="where the sdists are unpacked")
    pb.add_argument("--background", action="store_true", help="start each build as a process and return")
    args = p.parse_args(argv)
    try:
        if args.cmd == "install":
            secs = install(Path(args.sdist_dir), Path(args.wheel_dir), Path(args.target), Path(args.work))
            print(f"installed the Python parts into {args.target} in {secs:.1f} s (measurement, wall clock)")
            return 0
        if args.background:
            for m in args.ext:
                unpack(find_sdist(Path(args.sdist_dir), EXTENSIONS[m]), Path(args.work))  # before the processes race
            procs = {m: start_background(m, args) for m in args.ext}
            for m, proc in procs.items():
                print(f"building {m} in the background: pid {proc.pid}, log {Path(args.build_dir) / (m + '.log')}")
            return 0
        for m in args.ext:
            secs = build(m, Path(args.sdist_dir), Path(args.build_dir), args.arch, args.jobs, Path(args.work))
            print(f"built {m} for sm_{args.arch} in {secs:.1f} s (measurement, wall clock)")
        return 0
    except UserError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
