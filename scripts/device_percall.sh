#!/usr/bin/env bash
# One device call for issue #13 (the achievable-time model): the probe with its per-call, latency,
# L2 and copy measurements, scripts/percall_split.py, and suites, on a quiet CPU. The steps are
# scripts/device_lib.sh's (staging, installing, extension builds, sweeps with --resume); what differs
# from scripts/device.sh is the pinning: the extension builds run on cores 2.. only (taskset), and the
# probe, the per-call split and the sweeps on cores 0-1, so that host times per call are not measured
# against compilers competing for the same cores.
usage() {
  cat <<'EOF2'
Usage: bash scripts/device_percall.sh [OPTIONS]      (on the GPU machine, with $OUT set)

First the extension builds (background, cores 2..) and installing; then the steps in the order given:

  --probe             ssmbench probe --device cuda ($OUT/probe-<spec>.yaml)
  --probe-energy      ssmbench probe --device cuda --energy: NVML energy windows, one per term
                      ($OUT/probe-energy-<spec>.yaml)
  --percall LABELS    scripts/percall_split.py --only LABELS ($OUT/percall/percall_split_<n>.json)
  --suite FILE        a suite (file, or name in measure/suites/), with --resume
  --wait-builds       wait until no extension build is running (host times measured after it see no
                      compiler on the machine)
Other options:
  --resume DIR        earlier result folder: its finished cases are skipped; repeatable
  --build MODULE      compile this extension in the background (repeatable; default: none)
  --pack MODULE       pack this extension into $OUT/ext/ once built (repeatable; default: none)
  --prebuild-probe-ext  build the probe's small CUDA extension in the background with the others
  --deadline S        the whole call ends within S seconds (default 555)
  --help              this text
Each step keeps time for the later ones (probe 70 s, energy probe 60 s, percall 150 s, suite 60 s); a percall step
takes at most 300 s. Environment: BUILD_JOBS (default 12), PY (default python3). Device tool: carry
.sdist, .whl and optionally .prebuilt (an earlier call's $OUT/ext parts).
EOF2
}

cd "$(dirname "$0")/.." || exit 1
source scripts/device_lib.sh

bad() { echo "device_percall.sh: $*" >&2; exit 2; }
STEP_KIND=() STEP_ARG=() BUILD_MODS=() PACK_MODS=() PREBUILD_EXT=''
ARGS="$*"
while [ $# -gt 0 ]; do
  case "$1" in
    --help|-h) usage; exit 0 ;;
    --probe) STEP_KIND+=(probe); STEP_ARG+=(""); shift; continue ;;
    --probe-energy) STEP_KIND+=(energy); STEP_ARG+=(""); shift; continue ;;
    --wait-builds) STEP_KIND+=(wait); STEP_ARG+=(""); shift; continue ;;
    --prebuild-probe-ext) PREBUILD_EXT=1; shift; continue ;;
    --percall|--suite|--resume|--build|--pack|--deadline) ;;
    *) bad "unknown option '$1'" ;;
  esac
  [ $# -ge 2 ] || bad "$1 needs a value"
  case "$1" in
    --percall) STEP_KIND+=(percall); STEP_ARG+=("$2") ;;
    --suite) if [ -f "$2" ]; then STEP_ARG+=("$2"); elif [ -f "measure/suites/$2.yaml" ]; then
               STEP_ARG+=("measure/suites/$2.yaml"); else bad "--suite $2: no such suite"; fi
             STEP_KIND+=(suite) ;;
    --resume) [ -d "$2" ] || bad "--resume $2: no such folder"; RESUME_DIRS+=("$2") ;;
    --build) BUILD_MODS+=("$2") ;;
    --pack) PACK_MODS+=("$2") ;;
    --deadline) [[ $2 =~ ^[1-9][0-9]*$ ]] || bad "--deadline needs whole seconds"; DEADLINE_S=$2 ;;
    *) bad "unknown option '$1'" ;;
  esac
  shift 2
done
[ ${#STEP_KIND[@]} -gt 0 ] || bad "nothing to do: give --probe, --probe-energy, --percall or --suite"

NCPU=$(nproc 2>/dev/null || echo 16)
PIN_MEASURE=() PIN_BUILD=()
if command -v taskset >/dev/null && [ "$NCPU" -ge 4 ]; then
  PIN_MEASURE=(taskset -c 0-1) PIN_BUILD=(taskset -c "2-$((NCPU - 1))")
fi

begin_call device.log "device_percall.sh $ARGS"
say "measurements pinned with '${PIN_MEASURE[*]:-nothing}', builds with '${PIN_BUILD[*]:-nothing}' ($NCPU cores)"
unpack_extensions
TODO=()
for m in "${BUILD_MODS[@]}"; do
  if [ -f "$EXT/$m.so" ] && grep -qs '"state": "done"' "$EXT/$m.status.json"; then say "$m: already built"
  else TODO+=("$m"); fi
done
if [ ${#TODO[@]} -gt 0 ]; then
  say "starting background builds: ${TODO[*]} (${BUILD_JOBS:-12} jobs)"
  "${PIN_BUILD[@]}" "$PY" -m ssmbench.measure.extensions build --ext "${TODO[@]}" --sdist-dir .sdist \
      --build-dir "$EXT" --arch 90 --jobs "${BUILD_JOBS:-12}" --background
fi
pack_extensions "${PACK_MODS[@]}"
install_python_parts
if [ -n "$PREBUILD_EXT" ]; then  # the probe's extension (load_inline; same folder as the probe's build)
  say "building the probe's CUDA extension in the background"
  "${PIN_BUILD[@]}" "$PY" -c "from ssmbench.measure._probe_achievable import build_extension; build_extension()" \
      > "$OUT/probe_ext_build.log" 2>&1 &
  PREBUILD_PID=$!
fi
select_hw
check_imports

keep_after() {  # $1: a step's index. Seconds kept for the steps after it.
  local keep=0 j
  for (( j = $1 + 1; j < ${#STEP_KIND[@]}; j++ )); do
    case "${STEP_KIND[$j]}" in probe) keep=$(( keep + 70 )) ;; energy) keep=$(( keep + 60 )) ;;
                                percall) keep=$(( keep + 150 )) ;;
                                suite) keep=$(( keep + 60 )) ;; esac
  done
  echo "$keep"
}

wait_builds() {
  while grep -qs '"state": "building"' "$EXT"/*.status.json || { [ -n "${PREBUILD_PID:-}" ] && kill -0 "$PREBUILD_PID" 2>/dev/null; }; do
    [ "$(remaining)" -lt 60 ] && { say "builds still running with $(remaining) s left: not waiting longer"; return; }
    sleep 3
  done
  say "no build running"
}

NPERCALL=0
mkdir -p "$OUT/percall"  # beside results/, not in it: a results folder holds result files (--resume reads each)
for i in "${!STEP_KIND[@]}"; do
  case "${STEP_KIND[$i]}" in
    wait) wait_builds ;;
    probe)
      step_budget "$(keep_after "$i")" 240 10
      say "probe of $GPU_NAME (${BUDGET} s limit)"
      timeout -k 10 "$BUDGET" "${PIN_MEASURE[@]}" "${SSMBENCH[@]}" probe --device cuda --out "$OUT/probe-$HW.yaml" \
          || say "probe ended with exit $?" ;;
    energy)
      step_budget "$(keep_after "$i")" 240 10
      say "energy probe of $GPU_NAME (${BUDGET} s limit)"
      timeout -k 10 "$BUDGET" "${PIN_MEASURE[@]}" "${SSMBENCH[@]}" probe --device cuda --energy \
          --out "$OUT/probe-energy-$HW.yaml" || say "energy probe ended with exit $?" ;;
    percall)
      NPERCALL=$(( NPERCALL + 1 ))
      step_budget "$(keep_after "$i")" 300 10
      if [ "$BUDGET" -lt 30 ]; then say "percall_split ${STEP_ARG[$i]} skipped: ${BUDGET} s left"; continue; fi
      say "percall_split ${STEP_ARG[$i]} (${BUDGET} s limit)"
      # shellcheck disable=SC2086  # the labels are words
      timeout -k 10 "$BUDGET" "${PIN_MEASURE[@]}" "$PY" scripts/percall_split.py \
          --out "$OUT/percall/percall_split_$NPERCALL.json" --only ${STEP_ARG[$i]} || say "percall_split ended with exit $?" ;;
    suite)
      SAVED=("${SSMBENCH[@]}")
      SSMBENCH=("${PIN_MEASURE[@]}" "${SSMBENCH[@]}")  # run_sweep's command, on the measuring cores
      run_sweep "${STEP_ARG[$i]}" 150 "$(keep_after "$i")"
      SSMBENCH=("${SAVED[@]}") ;;
  esac
done
collect_build_logs
[[ " ${STEP_KIND[*]} " == *" suite "* ]] && summary
for f in "$OUT"/percall/percall_split_*.json; do
  [ -f "$f" ] && "$PY" -c "import json, sys; sys.path.insert(0, 'scripts'); import percall_split as p; \
p.print_table(json.load(open(sys.argv[1])))" "$f"
done
end_call
