#!/usr/bin/env bash
# One device call for issue #13 (the achievable-time model): the probe with its per-call, latency,
# L2 and copy measurements, scripts/percall_split.py, and suites, on a quiet CPU. The steps are
# scripts/device_lib.sh's (staging, installing, extension builds, sweeps with --resume); what differs
# from scripts/device.sh is the pinning: the extension builds run on cores 2.. only (taskset), and the
# probe, the per-call split and the sweeps on cores 0-1, so that host times per call are not measured
# against compilers competing for the same cores.
usage() {
  cat <<'EOF'
Usage: bash scripts/device_percall.sh [OPTIONS]      (on the GPU machine, with $OUT set)

Order: extension builds (background, cores 2..), install, spec, --probe, --percall, the --suite
steps in the order given, --percall-late, a summary table.

  --probe             ssmbench probe --device cuda ($OUT/probe-<spec>.yaml)
  --percall LABELS    scripts/percall_split.py --only LABELS ($OUT/percall_split_1.json), before the
                      suites (at most 300 s)
  --percall-late LABELS  the same after the suites ($OUT/percall_split_2.json): calls whose extension
                      builds longest; the suites keep 90 s for it
  --suite FILE        a suite (file, or name in measure/suites/); repeatable
  --resume DIR        earlier result folder: its finished cases are skipped; repeatable
  --build MODULE      compile this extension in the background (repeatable; default: none)
  --pack MODULE       pack this extension into $OUT/ext/ once built (repeatable; default: none)
  --deadline S        the whole call ends within S seconds (default 555)
  --help              this text
Environment: BUILD_JOBS (default 12), PY (default python3). Device tool: carry .sdist, .whl and
optionally .prebuilt (an earlier call's $OUT/ext parts).
EOF
}

cd "$(dirname "$0")/.." || exit 1
source scripts/device_lib.sh

bad() { echo "device_percall.sh: $*" >&2; exit 2; }
PROBE='' PERCALL='' PERCALL_LATE='' SUITES=() BUILD_MODS=() PACK_MODS=()
ARGS="$*"
while [ $# -gt 0 ]; do
  case "$1" in
    --help|-h) usage; exit 0 ;;
    --probe) PROBE=1; shift; continue ;;
  esac
  [ $# -ge 2 ] || bad "$1 needs a value"
  case "$1" in
    --percall) PERCALL=$2 ;;
    --percall-late) PERCALL_LATE=$2 ;;
    --suite) if [ -f "$2" ]; then SUITES+=("$2"); elif [ -f "measure/suites/$2.yaml" ]; then
               SUITES+=("measure/suites/$2.yaml"); else bad "--suite $2: no such suite"; fi ;;
    --resume) [ -d "$2" ] || bad "--resume $2: no such folder"; RESUME_DIRS+=("$2") ;;
    --build) BUILD_MODS+=("$2") ;;
    --pack) PACK_MODS+=("$2") ;;
    --deadline) [[ $2 =~ ^[1-9][0-9]*$ ]] || bad "--deadline needs whole seconds"; DEADLINE_S=$2 ;;
    *) bad "unknown option '$1'" ;;
  esac
  shift 2
done

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
select_hw
check_imports

if [ -n "$PROBE" ]; then
  say "probe of $GPU_NAME"
  timeout -k 10 "$(( $(remaining) - 60 < 240 ? $(remaining) - 60 : 240 ))" "${PIN_MEASURE[@]}" "${SSMBENCH[@]}" \
      probe --device cuda --out "$OUT/probe-$HW.yaml" || say "probe ended with exit $?"
fi

percall() {  # $1: output file, $2: labels, $3: seconds kept for later steps, $4: cap in seconds
  step_budget "$3" "$4" 10
  if [ "$BUDGET" -lt 30 ]; then say "percall_split $2 skipped: ${BUDGET} s left"; return; fi
  say "percall_split $2 (${BUDGET} s limit)"
  # shellcheck disable=SC2086  # the labels are words
  timeout -k 10 "$BUDGET" "${PIN_MEASURE[@]}" "$PY" scripts/percall_split.py --out "$1" --only $2 \
      || say "percall_split ended with exit $?"
}

LATE_KEEP=0
[ -n "$PERCALL_LATE" ] && LATE_KEEP=90
[ -n "$PERCALL" ] && percall "$OUT/percall_split_1.json" "$PERCALL" "$(( LATE_KEEP + 60 ))" 300
# the sweeps on the measurement cores too (run_sweep's command, pinned)
SSMBENCH=("${PIN_MEASURE[@]}" "${SSMBENCH[@]}")
for i in "${!SUITES[@]}"; do
  run_sweep "${SUITES[$i]}" 150 "$(( (${#SUITES[@]} - 1 - i) * 60 + LATE_KEEP ))"
done
[ -n "$PERCALL_LATE" ] && percall "$OUT/percall_split_2.json" "$PERCALL_LATE" 0 150
collect_build_logs
[ ${#SUITES[@]} -gt 0 ] && summary
for f in "$OUT"/percall_split_*.json; do
  [ -f "$f" ] && "$PY" -c "import json, sys; sys.path.insert(0, 'scripts'); import percall_split as p; \
p.print_table(json.load(open(sys.argv[1])))" "$f"
done
end_call
