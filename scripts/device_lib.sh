# Shared steps of the device scripts (sourced, not run). On the GPU machine: repository root as cwd,
# $OUT set, no network, python3 = the interpreter that has torch. Needs the sdists in .sdist/ and the
# wheels in .whl/ (pass both in the device tool's `carry`); extensions built by an earlier call may
# come as .prebuilt/ext.tar.*.part* (carry .prebuilt too; see pack_extensions).
set -uo pipefail
export PYTHONUNBUFFERED=1
# The repo root is the cwd and holds a folder `ssmbench/` (the front door only); without this Python would
# put the cwd first on sys.path and import that folder instead of the staged package.
export PYTHONSAFEPATH=1
: "${OUT:?OUT must be set (the folder whose files come back)}"
PY=${PY:-python3}
T_START=$(date +%s)
DEADLINE_S=${DEADLINE_S:-555}           # the whole script ends within this many seconds (limit 600)
PKG=/tmp/ssmbench_pkg SITE=/tmp/site EXT=/tmp/ext
RESUME_FROM=${RESUME_FROM:-}            # folders of earlier result files (space-separated) to resume from
export SSMBENCH_EXT_BUILD_DIR=$EXT
export PYTHONPATH=$PKG:$SITE:$EXT${PYTHONPATH:+:$PYTHONPATH}
mkdir -p "$OUT/results" "$EXT"

elapsed() { echo $(( $(date +%s) - T_START )); }
remaining() { echo $(( DEADLINE_S - $(elapsed) )); }
say() { echo "[$(elapsed) s] $*"; }

begin_call() {  # $1: log file name under $OUT, $2: what this call does. Log everything, pick the spec, stage.
  exec > >(tee -a "$OUT/$1") 2>&1
  say "$2 on $(hostname); $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null)"
  select_hw
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
  # The hardware spec for roofline fractions, by the exact name the driver reports (an unknown
  # device stops the script rather than being measured against the wrong spec). HW=... overrides.
  GPU_NAME=$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -n 1)
  if [ -z "${HW:-}" ]; then
    case "$GPU_NAME" in
      "NVIDIA H200") HW=h200-sxm ;;
      "NVIDIA H100 80GB HBM3") HW=h100-sxm ;;
      *) say "no spec is known for the device '$GPU_NAME': set HW=<spec id> (ssmbench specs list)"; exit 2 ;;
    esac
  fi
  say "device: $GPU_NAME; roofline fractions against spec $HW"
}

check_imports() {  # after the wheels are installed (pydantic, pint, rich may come from .whl/)
  $PY -c "import ssmbench, ssmbench.measure.runners, ssmbench.measure.commands, ssmbench.hwspecs.loader; \
print('ssmbench staged at', ssmbench.__file__)" || say "ssmbench does not import: see above"
}

start_builds() {  # $@: extension modules. Carried prebuilt ones, or ones already built on this machine, are kept.
  unpack_extensions
  local need=() m
  for m in "$@"; do
    if [ -f "$EXT/$m.so" ] && grep -qs '"state": "done"' "$EXT/$m.status.json"; then say "$m: already built in $EXT"
    else need+=("$m"); fi
  done
  [ ${#need[@]} -eq 0 ] && return
  say "starting background builds: ${need[*]}"
  $PY -m ssmbench.measure.build_extensions build --ext "${need[@]}" --sdist-dir .sdist --build-dir "$EXT" \
      --arch 90 --jobs "${BUILD_JOBS:-10}" --background
}

unpack_extensions() {
  # Extensions built by an earlier call on the same image (pack_extensions), carried as .prebuilt/:
  # the .so files and their status files (state done, with the flags they were built with).
  local parts
  parts=$(ls .prebuilt/ext.tar.*.part* 2>/dev/null) || return 1
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

pack_extensions() {  # $@: the modules to pack (default: every .so built or unpacked here)
  # In the background: once every started build is done, pack the .so files and status files into
  # $OUT/ext/ in parts of at most 15 MiB (the device tool returns files of up to 16 MiB), so that a
  # later call on a fresh machine can carry them as .prebuilt/ instead of compiling for minutes (the
  # carry limit is 64 MiB with the tree: selective_scan_cuda's ~37 MB or causal_conv1d_cuda's ~22 MB).
  # Two compressor threads only: the sweep's launch-bound cases keep the other cores.
  local mods=("$@")
  (
    while grep -qs '"state": "building"' "$EXT"/*.status.json; do
      [ "$(remaining)" -lt 40 ] && { echo "[packer] builds unfinished with $(remaining) s left: nothing packed"; exit 0; }
      sleep 5
    done
    local files=() m
    if [ ${#mods[@]} -eq 0 ]; then files=($(cd "$EXT" && ls ./*.so ./*.status.json 2>/dev/null))
    else for m in "${mods[@]}"; do [ -f "$EXT/$m.so" ] && files+=("$m.so" "$m.status.json"); done; fi
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
  timeout 300 $PY -m ssmbench.measure.build_extensions install --sdist-dir .sdist --wheel-dir .whl --target "$SITE" \
    || say "install FAILED (exit $?): the kernel backends will report Unavailable"
}

probe_unless_known() {
  # The attained ceilings of this device, unless a probe file of a device of this name is among the
  # earlier results (RESUME_FROM); read before the sweeps, on an idle GPU.
  local known
  known=$($PY - "$GPU_NAME" $RESUME_FROM <<'PYEOF'
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
  timeout 90 $PY -c "import sys; from ssmbench.cli import main; sys.exit(main(sys.argv[1:]))" \
      probe --device cuda --out "$OUT/probe-$HW.yaml" || say "probe ended with exit $?"
}

run_sweep() {  # $1: suite file; keeps 25 s (+ $2 s reserved for later steps) for what follows; $3...: more
  # measure options (--filter TEXT, --case-timeout S)
  local suite=$1 reserve=${2:-0}; shift 2
  local budget=$(( $(remaining) - 25 - reserve ))
  [ "$budget" -gt "${SWEEP_MAX_S:-100000}" ] && budget=$SWEEP_MAX_S  # a cap for this sweep alone
  if [ "$budget" -lt 20 ]; then say "sweep $suite $* skipped: ${budget} s left"; return; fi
  export SSMBENCH_EXT_WAIT_S=$budget
  local from=() d
  for d in $RESUME_FROM; do from+=(--resume-from "$d"); done
  say "sweep $suite $* with a ${budget} s limit"
  timeout -s INT -k 20 "$budget" $PY - measure --suite "$suite" --device cuda --out "$OUT/results" --hw "$HW" \
      --target-time 0.3 --energy-window 1.0 --resume "${from[@]}" "$@" <<'PYEOF'
import argparse, sys
from ssmbench.measure import commands  # called directly: works whether or not the CLI lists it yet
p = argparse.ArgumentParser(prog="ssmbench")
commands.register(p.add_subparsers(dest="command", required=True))
a = p.parse_args(sys.argv[1:])
sys.exit(a.func(a))
PYEOF
  say "sweep ended (exit $?)"
}

run_byte_audit() {  # $1: output json, $2...: byte_audit options (--suite ..., --backends ...); at most AUDIT_MAX_S s
  local out=$1; shift
  local budget=$(( $(remaining) - 20 ))
  [ "$budget" -gt "${AUDIT_MAX_S:-300}" ] && budget=${AUDIT_MAX_S:-300}
  if [ "$budget" -lt 40 ]; then say "byte audit skipped: ${budget} s left"; return; fi
  local ncu
  ncu=$(command -v ncu || ls -d /opt/nvidia/nsight-compute/*/ncu /usr/local/cuda/bin/ncu 2>/dev/null | tail -n 1)
  if [ -z "$ncu" ]; then say "byte audit skipped: ncu not found"; return; fi
  export SSMBENCH_EXT_WAIT_S=$budget
  say "byte audit $* with $ncu (${budget} s limit)"
  timeout -k 10 "$budget" $PY -m ssmbench.measure.byte_audit --out "$out" --per-backend 1 \
      --ncu "$ncu" --timeout $(( budget - 10 )) "$@" || say "byte audit ended with exit $?"
}

run_gpu_tests() {  # $1: seconds for pytest, $2...: more pytest options (-k EXPR). The gpu-marked tests:
  # real kernels through the gate, NVML, graphs; verbose, with a stack dump of any test still running
  # after 120 s (a Triton compile or autotune, or a hang) and the slowest tests' durations.
  local limit=${1:-60}; shift
  local budget=$(( $(remaining) - 15 ))
  [ "$budget" -gt "$limit" ] && budget=$limit
  if [ "$budget" -lt 30 ]; then say "gpu tests $* skipped: ${budget} s left"; return; fi
  export SSMBENCH_EXT_WAIT_S=$budget
  say "pytest -m gpu $* (${budget} s limit)"
  timeout -k 10 "$budget" $PY -m pytest -m gpu -v -rs --durations=10 -o faulthandler_timeout=120 \
      -p no:cacheprovider "$@" tests || say "pytest -m gpu $* ended with exit $?"
}

collect_build_logs() {  # status files and the last lines of each build log, into the log
  for s in "$EXT"/*.status.json; do [ -f "$s" ] && { echo "== $s"; cat "$s"; echo; }; done
  for l in "$EXT"/*.log; do [ -f "$l" ] && { echo "== tail of $l"; tail -n 30 "$l"; }; done
}

case_limit_left() {  # a watchdog limit for a last sweep's one long case: the time left, less the sweep's
  # 25 s margin and 30 s for the watchdog to write the record before the sweep's own timeout
  echo $(( $(remaining) - 25 - 30 ))
}

summary() {  # the cases this call measured, then the totals over them and the earlier results
  # shellcheck disable=SC2086
  $PY scripts/summarize_results.py "$OUT/results" --totals-with $RESUME_FROM || true
  end_call
}

end_call() {
  [ -n "${PACK_PID:-}" ] && wait "$PACK_PID"  # a packer still compressing (it gives up 40 s before the deadline)
  say "done"
  sleep 1  # let tee flush the log before the command returns
}
