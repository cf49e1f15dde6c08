# shellcheck shell=bash
# The steps of scripts/device.sh (sourced, not run). Sourcing only defines them: nothing here touches
# the GPU, $OUT or the network until begin_call. On the GPU machine: repository root as cwd, $OUT set,
# no network, python3 = the interpreter that has torch. Needs the sdists in .sdist/ and the wheels in
# .whl/ (pass both in the device tool's `carry`); extensions built by an earlier call may come as
# .prebuilt/ext.tar.*.part* (carry .prebuilt too; see pack_extensions).
set -uo pipefail
export PYTHONUNBUFFERED=1
# The repo root is the cwd and holds a folder `ssmbench/` (the front door only); without this Python would
# put the cwd first on sys.path and import that folder instead of the staged package.
export PYTHONSAFEPATH=1
PY=${PY:-python3}
T_START=$(date +%s)
DEADLINE_S=555                          # the whole call ends within this many seconds (the tool's limit: 600)
TMP=${TMPDIR:-/tmp}
PKG=$TMP/ssmbench_pkg SITE=$TMP/site EXT=$TMP/ext
RESUME_DIRS=()                          # folders of earlier result files: their finished cases are skipped
# shellcheck disable=SC2034  # read by device.sh
EXTENSIONS=(selective_scan_cuda causal_conv1d_cuda)  # those measure/extensions.py can build (its EXTENSIONS)
BUILDING=()                             # the extensions this call compiles (start_builds)
export SSMBENCH_EXT_BUILD_DIR=$EXT
export PYTHONPATH=$PKG:$SITE:$EXT${PYTHONPATH:+:$PYTHONPATH}
# The package is copied, not installed, so there is no `ssmbench` executable: the CLI's main, by module.
SSMBENCH=("$PY" -c "import sys; from ssmbench.cli import main; sys.exit(main(sys.argv[1:]))")
# Backends of the libraries whose CUDA extensions are compiled here (the flash-attn package is not:
# its build takes far longer than a call).
# shellcheck disable=SC2034  # read by device.sh
EXT_BACKENDS='mamba_ssm.*,causal_conv1d.*'
# shellcheck disable=SC2034  # read by device.sh
NO_BUILD_BACKENDS='mamba_ssm.*,causal_conv1d.*,flash_attn.*'

elapsed() { echo $(( $(date +%s) - T_START )); }
remaining() { echo $(( DEADLINE_S - $(elapsed) )); }
say() { echo "[$(elapsed) s] $*"; }

begin_call() {  # $1: log file name under $OUT, $2: what this call does. Log everything, stage the package.
  : "${OUT:?OUT must be set (the folder whose files come back)}"
  mkdir -p "$OUT/results" "$EXT"
  exec > >(tee -a "$OUT/$1") 2>&1
  say "$2 on $(hostname); $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null)"
  stage_package
}

stage_package() {
  # The ssmbench package as pyproject.toml maps it (top-level folders -> ssmbench.<name>), copied
  # rather than pip-installed: no setuptools version or build step on the GPU machine matters.
  rm -rf "$PKG" && mkdir -p "$PKG/ssmbench"
  cp -r ssmbench/. "$PKG/ssmbench/"
  for d in hwspecs analytic measure calibrate figures; do cp -r "$d" "$PKG/ssmbench/$d"; done
}

select_hw() {
  # The hardware spec for roofline fractions: the one whose device_names hold the exact name the driver
  # reports (an unknown device stops the call rather than being measured against the wrong spec).
  # HW=<spec id> overrides. Needs the installed wheels: the spec schema imports pydantic.
  GPU_NAME=$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -n 1)
  if [ -z "${HW:-}" ]; then
    HW=$("$PY" -c "import sys
from ssmbench.hwspecs import SpecError, spec_for_device
try:
    print(spec_for_device(sys.argv[1]).id)
except SpecError as e:
    sys.exit(str(e))" "$GPU_NAME") || { say "no spec for the device '$GPU_NAME' (above); set HW=<spec id>"; exit 2; }
  fi
  say "device: $GPU_NAME; roofline fractions against spec $HW"
}

check_imports() {
  "$PY" -c "import ssmbench, ssmbench.measure.backends, ssmbench.commands.measure, ssmbench.hwspecs.loader; \
print('ssmbench staged at', ssmbench.__file__)" || say "ssmbench does not import: see above"
}

needed_extensions() {  # $@: suite files. Prints the extensions their backends import: every mamba-ssm
  # backend imports selective_scan_cuda (the package __init__ does); causal-conv1d's backends, and the
  # Mamba and Mamba2 blocks (their convolution), import causal_conv1d_cuda.
  "$PY" - "$@" <<'PYEOF'
import sys, yaml
backends = {str(e.get("backend")) for p in sys.argv[1:] for e in (yaml.safe_load(open(p)) or {}).get("entries") or []}
need = {"selective_scan_cuda": any(b.startswith("mamba_ssm.") for b in backends),
        "causal_conv1d_cuda": any(b.startswith("causal_conv1d.") or b in ("mamba_ssm.Mamba", "mamba_ssm.Mamba2")
                                  for b in backends)}
print(" ".join(m for m, n in need.items() if n))
PYEOF
}

start_builds() {  # $@: extension modules. Carried prebuilt ones, or ones already built on this machine, are kept.
  unpack_extensions
  local m
  for m in "$@"; do
    if [ -f "$EXT/$m.so" ] && grep -qs '"state": "done"' "$EXT/$m.status.json"; then say "$m: already built in $EXT"
    else BUILDING+=("$m"); fi
  done
  [ ${#BUILDING[@]} -eq 0 ] && return
  say "starting background builds: ${BUILDING[*]}"
  "$PY" -m ssmbench.measure.extensions build --ext "${BUILDING[@]}" --sdist-dir .sdist --build-dir "$EXT" \
      --arch 90 --jobs "${BUILD_JOBS:-10}" --background
}

unpack_extensions() {
  # Extensions built by an earlier call on the same image (pack_extensions), carried as .prebuilt/:
  # the .so files and their status files (state done, with the flags they were built with).
  # PREBUILT_DIR (default .prebuilt) lets the script's tests point away from a checkout's carry data.
  local parts
  parts=$(ls "${PREBUILT_DIR:-.prebuilt}"/ext.tar.*.part* 2>/dev/null) || return 1
  [ -n "$parts" ] || return 1
  local dec="xz -d"; case "$parts" in *.tar.gz.*) dec="gzip -d" ;; esac
  # shellcheck disable=SC2086
  if cat $parts | $dec | tar -C "$EXT" -xf -; then
    say "unpacked prebuilt extensions from .prebuilt/: $(cd "$EXT" && ls ./*.so | tr '\n' ' ')"
    return 0
  fi
  say "could not unpack .prebuilt/ (see above): building instead"
  return 1
}

pack_extensions() {  # $@: the modules to pack
  # In the background: once every started build is done, pack the .so files and status files into
  # $OUT/ext/ in parts of at most 15 MiB (the device tool returns files of up to 16 MiB), so that a
  # later call on a fresh machine can carry them as .prebuilt/ instead of compiling for minutes (the
  # carry limit is 64 MiB with the tree: selective_scan_cuda's ~37 MB or causal_conv1d_cuda's ~22 MB).
  # Two compressor threads only: the sweep's launch-bound cases keep the other cores.
  local mods=("$@")
  [ ${#mods[@]} -eq 0 ] && return
  (
    while grep -qs '"state": "building"' "$EXT"/*.status.json; do
      [ "$(remaining)" -lt 40 ] && { echo "[packer] builds unfinished with $(remaining) s left: nothing packed"; exit 0; }
      sleep 5
    done
    local files=() m
    for m in "${mods[@]}"; do [ -f "$EXT/$m.so" ] && files+=("$m.so" "$m.status.json"); done
    [ ${#files[@]} -eq 0 ] && { echo "[packer] nothing built to pack"; exit 0; }
    mkdir -p "$OUT/ext"
    local comp="xz -T2 -3" ext="xz"
    command -v xz >/dev/null || { comp="gzip -1"; ext="gz"; }
    (cd "$EXT" && tar -cf - "${files[@]}") | $comp | split -b 15M -d - "$OUT/ext/ext.tar.$ext.part"
    echo "[packed] ${files[*]}: $(ls -l "$OUT/ext" | tail -n +2 | awk '{print $5, $9}' | tr '\n' ' ')"
  ) &
  PACK_PID=$!
}

install_python_parts() {
  say "installing .whl/*.whl, then mamba-ssm, causal-conv1d, fla-core (Python parts, no compiling)"
  timeout 300 "$PY" -m ssmbench.measure.extensions install --sdist-dir .sdist --wheel-dir .whl --target "$SITE" \
    || say "install FAILED (exit $?): the kernel backends will report Unavailable"
}

probe_unless_known() {
  # The attained ceilings of this device, unless a probe file of a device of this name is among the
  # earlier results (RESUME_DIRS); read before the sweeps, on an idle GPU.
  local known
  known=$("$PY" - "$GPU_NAME" "${RESUME_DIRS[@]}" <<'PYEOF'
import glob, sys, yaml
name, dirs = sys.argv[1], sys.argv[2:]
for d in dirs:
    for p in sorted(glob.glob(f"{d}/probe-*.yaml")):
        if ((yaml.safe_load(open(p)) or {}).get("meta", {}).get("device") or {}).get("name") == name:
            print(p)
PYEOF
)
  if [ -n "$known" ]; then say "probe skipped: this device's ceilings are in $known"; return; fi
  say "probe of $GPU_NAME"
  timeout 90 "${SSMBENCH[@]}" probe --device cuda --out "$OUT/probe-$HW.yaml" || say "probe ended with exit $?"
}

step_budget() {  # $1: seconds kept for the steps after this one, $2: this step's cap, $3: margin for
  # ending it. Sets BUDGET, the seconds this step may take; its wait for an extension build too.
  BUDGET=$(( $(remaining) - $3 - $1 ))
  [ "$BUDGET" -gt "$2" ] && BUDGET=$2
  export SSMBENCH_EXT_WAIT_S=$BUDGET
}

run_sweep() {  # $1: suite file, $2: watchdog seconds per case, $3: seconds kept for the steps after it
  local suite=$1 case_s=$2
  step_budget "$3" 100000 25
  if [ "$BUDGET" -lt 50 ]; then say "sweep $suite skipped: ${BUDGET} s left"; return; fi
  # A watchdog longer than the sweep's own limit would never fire: the sweep's timeout would end the
  # case without a record. Keep 30 s for the watchdog to write it.
  [ "$case_s" -gt $(( BUDGET - 30 )) ] && case_s=$(( BUDGET - 30 ))
  local from=() d
  for d in "${RESUME_DIRS[@]}"; do from+=(--resume-from "$d"); done
  say "sweep $suite (watchdog ${case_s} s per case) with a ${BUDGET} s limit"
  timeout -s INT -k 20 "$BUDGET" "${SSMBENCH[@]}" measure --suite "$suite" --device cuda --out "$OUT/results" \
      --hw "$HW" --target-time 0.3 --energy-window 1.0 --case-timeout "$case_s" --resume "${from[@]}"
  say "sweep ended (exit $?)"
}

run_byte_audit() {  # $1: output json, $2: cap in seconds, $3: seconds kept for later steps, $4...: byte_audit
  # options (--suite ..., --backends ...)
  local out=$1
  step_budget "$3" "$2" 20
  shift 3
  if [ "$BUDGET" -lt 40 ]; then say "byte audit skipped: ${BUDGET} s left"; return; fi
  local ncu
  ncu=$(command -v ncu || ls -d /opt/nvidia/nsight-compute/*/ncu /usr/local/cuda/bin/ncu 2>/dev/null | tail -n 1)
  if [ -z "$ncu" ]; then say "byte audit skipped: ncu not found"; return; fi
  say "byte audit $* with $ncu (${BUDGET} s limit)"
  timeout -k 10 "$BUDGET" "$PY" -m ssmbench.measure.byte_audit --out "$out" --per-backend 1 \
      --ncu "$ncu" --timeout $(( BUDGET - 10 )) "$@" || say "byte audit ended with exit $?"
}

run_gpu_tests() {  # $1: seconds kept for the steps after them. The gpu-marked tests (real kernels through
  # the gate, NVML, graphs) in two parts: those that need no mamba-ssm run while selective_scan_cuda
  # compiles (mamba-ssm's package __init__ imports it, so every mamba-ssm test waits for it), then the
  # mamba-ssm ones. A fresh machine compiles and autotunes each Triton kernel first (~40-90 s for the
  # Mamba-3 and SSD ones), hence minutes per part.
  gpu_tests_part "$1" 220 -k "not mamba_ssm"
  gpu_tests_part "$1" 300 -k "mamba_ssm"
}

gpu_tests_part() {  # $1: seconds kept for later steps, $2: cap, $3...: more pytest options (-k EXPR).
  # Verbose, with a stack dump of any test still running after 120 s (a Triton compile or autotune, or
  # a hang) and the slowest tests' durations.
  step_budget "$1" "$2" 15
  shift 2
  if [ "$BUDGET" -lt 30 ]; then say "gpu tests $* skipped: ${BUDGET} s left"; return; fi
  say "pytest -m gpu $* (${BUDGET} s limit)"
  timeout -k 10 "$BUDGET" "$PY" -m pytest -m gpu -v -rs --durations=10 -o faulthandler_timeout=120 \
      -p no:cacheprovider "$@" tests || say "pytest -m gpu $* ended with exit $?"
}

collect_build_logs() {  # status files and the last lines of each build log, into the log
  for s in "$EXT"/*.status.json; do [ -f "$s" ] && { echo "== $s"; cat "$s"; echo; }; done
  for l in "$EXT"/*.log; do [ -f "$l" ] && { echo "== tail of $l"; tail -n 30 "$l"; }; done
}

summary() {  # the cases this call measured, then the totals over them and the earlier results
  "$PY" scripts/summarize_results.py "$OUT/results" --totals-with "${RESUME_DIRS[@]}" || true
}

end_call() {
  [ -n "${PACK_PID:-}" ] && wait "$PACK_PID"  # a packer still compressing (it gives up 40 s before the deadline)
  say "done"
  sleep 1  # let tee flush the log before the command returns
}
