#!/usr/bin/env bash
# One device call: stage ssmbench, build CUDA extensions in the background, then run the steps asked
# for within the deadline. Every finished case is on disk at once, so a cut-off call keeps its cases.
# The steps are in scripts/device_lib.sh; this file parses the options (before any GPU or staging
# work, so that a wrong option costs no device time) and orders the steps.
usage() {
  cat <<'EOF'
Usage: bash scripts/device.sh [OPTIONS]      (on the GPU machine, with $OUT set)

Steps, in this order: build extensions (background), install the Python parts, pick the hardware
spec, --probe, --byte-audit's first part, the --suite and --gpu-tests steps in the order given,
--byte-audit's second part, a summary table.

  --suite FILE        run this suite (a YAML file, or the name of one in measure/suites/); repeatable:
                      suites run in the order given, each with the time left after keeping time for
                      the steps after it
  --case-timeout S    watchdog seconds per case for the suites named after this option (default 150);
                      never more than the sweep's own time less 30 s, so a large S gives each case
                      all the time left
  --resume DIR        an earlier result folder (relative to the repository root); repeatable: cases
                      finished on a device of this name there are skipped, and --probe is skipped when
                      a probe file of this device is there
  --build MODULE      compile this CUDA extension in the background first (selective_scan_cuda,
                      causal_conv1d_cuda); repeatable. Default: those the suites' backends import
                      (every extension when --gpu-tests is given)
  --gpu-tests         run the gpu-marked tests (pytest -m gpu, verbose, stack dumps after 120 s): those
                      that need no mamba-ssm, then the mamba-ssm ones; a step, ordered with --suite
  --byte-audit        the ncu byte audit of the suites' backends: those that need no extension while the
                      builds run ($OUT/byte_audit_noext.json), the rest after the suites
                      ($OUT/byte_audit_ext.json)
  --audit-sections L  ncu sections the byte audit collects too, comma-separated (SpeedOfLight, Occupancy,
                      LaunchStats, WarpStateStats, ComputeWorkloadAnalysis, MemoryWorkloadAnalysis,
                      SchedulerStats, InstructionStats): per kernel, where its time goes
  --audit-modes L     the modes the byte audit profiles, comma-separated (fwd, bwd, fwdbwd, decode; default
                      fwd,decode)
  --probe             measure this device's attained ceilings ($OUT/probe-<spec>.yaml) unless a
                      --resume folder holds them
  --deadline S        the whole call ends within S seconds (default 555; the device tool allows 600)
  --help              this text

Environment: HW=<spec id> (the spec for roofline fractions, instead of the one whose device_names
hold the GPU's name), BUILD_JOBS (ninja jobs per build, default 10), PY (default python3),
SSMBENCH_SOURCE_COMMIT / SSMBENCH_SOURCE_DIRTY (the commit of the sent tree: the copy has no .git).
Device tool: carry [".sdist", ".whl"], and ".prebuilt" holding an earlier call's $OUT/ext/ parts.
Writes $OUT/device.log, $OUT/results/run-*.json(l), $OUT/ext/* (the extensions compiled here,
packed), and the probe and byte audit files named above.
EOF
}

cd "$(dirname "$0")/.." || exit 1
source scripts/device_lib.sh

KEEP_PER_STEP_S=120   # kept for each later --suite / --gpu-tests step, so that a long one leaves them time
KEEP_AUDIT_S=60       # kept for --byte-audit's second part

bad() {
  echo "device.sh: $*" >&2
  echo "run 'bash scripts/device.sh --help' for the options" >&2
  exit 2
}

seconds() {  # $1: option, $2: its value; a positive whole number of seconds
  [[ ${2:-} =~ ^[1-9][0-9]*$ ]] || bad "$1 needs a positive whole number of seconds, got '${2:-}'"
}

resolve_suite() {  # a suite file by path, or by name in measure/suites/
  if [ -f "$1" ]; then SUITE_FILE=$1
  elif [ -f "measure/suites/$1.yaml" ]; then SUITE_FILE=measure/suites/$1.yaml
  else bad "--suite $1: no such file, and no measure/suites/$1.yaml"; fi
}

AUDIT_SECTION_NAMES="SpeedOfLight Occupancy LaunchStats WarpStateStats ComputeWorkloadAnalysis MemoryWorkloadAnalysis SchedulerStats InstructionStats"
AUDIT_MODE_NAMES="fwd bwd fwdbwd decode"

listed() {  # $1: option, $2: its comma-separated value, $3: the names allowed (space-separated)
  local x
  [ -n "$2" ] || bad "$1 needs a comma-separated list of: $3"
  for x in ${2//,/ }; do
    [[ " $3 " == *" $x "* ]] || bad "$1: '$x' is not one of: $3"
  done
}

STEP_KIND=() STEP_ARG=() STEP_CASE_S=() SUITES=() BUILD_MODS=() AUDIT_EXTRA=()
CASE_S=150 CASE_S_USED=1 PROBE='' AUDIT=''
ARGS="$*"
while [ $# -gt 0 ]; do
  opt=$1
  case "$opt" in
    --help|-h) usage; exit 0 ;;
    --suite|--case-timeout|--resume|--build|--deadline|--audit-sections|--audit-modes)
      [ $# -ge 2 ] || bad "$opt needs a value"
      val=$2; shift ;;
  esac
  case "$opt" in
    --suite) resolve_suite "$val"; STEP_KIND+=(suite); STEP_ARG+=("$SUITE_FILE"); STEP_CASE_S+=("$CASE_S")
             SUITES+=("$SUITE_FILE"); CASE_S_USED=1 ;;
    --case-timeout) seconds "$opt" "$val"; CASE_S=$val CASE_S_USED= ;;
    --resume) [ -d "$val" ] || bad "--resume $val: no such folder (paths are relative to the repository root)"
              RESUME_DIRS+=("$val") ;;
    --build) [[ " ${EXTENSIONS[*]} " == *" $val "* ]] || bad "--build $val: not one of ${EXTENSIONS[*]}"
             BUILD_MODS+=("$val") ;;
    --deadline) seconds "$opt" "$val"; DEADLINE_S=$val ;;
    --gpu-tests) STEP_KIND+=(gpu-tests); STEP_ARG+=(""); STEP_CASE_S+=("") ;;
    --byte-audit) AUDIT=1 ;;
    --audit-sections) listed "$opt" "$val" "$AUDIT_SECTION_NAMES"; AUDIT_EXTRA+=(--sections "$val") ;;
    --audit-modes) listed "$opt" "$val" "$AUDIT_MODE_NAMES"; read -ra modes <<< "${val//,/ }"
                   AUDIT_EXTRA+=(--modes "${modes[@]}") ;;
    --probe) PROBE=1 ;;
    *) bad "unknown option '$opt'" ;;
  esac
  shift
done
[ -n "$CASE_S_USED" ] || bad "--case-timeout applies to the suites named after it, and no --suite follows it"
[ ${#STEP_KIND[@]} -gt 0 ] || [ -n "$PROBE" ] || bad "nothing to do: give --suite, --gpu-tests or --probe"
[ -z "$AUDIT" ] || [ ${#SUITES[@]} -gt 0 ] || bad "--byte-audit audits the suites' backends: give --suite"
[ -n "$AUDIT" ] || [ ${#AUDIT_EXTRA[@]} -eq 0 ] || bad "--audit-sections and --audit-modes apply to --byte-audit: give it"

keep_after() {  # $1: a step's index (-1: before the first). Seconds kept for what comes after it.
  local keep=$(( (${#STEP_KIND[@]} - 1 - $1) * KEEP_PER_STEP_S ))
  [ -n "$AUDIT" ] && keep=$(( keep + KEEP_AUDIT_S ))
  echo "$keep"
}

begin_call device.log "device.sh $ARGS"
if [ ${#BUILD_MODS[@]} -eq 0 ]; then
  if [[ " ${STEP_KIND[*]} " == *" gpu-tests "* ]]; then BUILD_MODS=("${EXTENSIONS[@]}")
  elif [ ${#SUITES[@]} -gt 0 ]; then read -ra BUILD_MODS <<< "$(needed_extensions "${SUITES[@]}")"; fi
fi
start_builds "${BUILD_MODS[@]}"
pack_extensions "${BUILDING[@]}"
# Installed after the builds start (they take minutes; the install, seconds); the spec's schema needs
# the installed wheels.
install_python_parts
select_hw
check_imports
[ -n "$PROBE" ] && probe_unless_known
AUDIT_SUITES=()
for s in "${SUITES[@]}"; do AUDIT_SUITES+=(--suite "$s"); done
[ -n "$AUDIT" ] && run_byte_audit "$OUT/byte_audit_noext.json" 150 "$(keep_after -1)" "${AUDIT_SUITES[@]}" \
    --exclude-backends "$NO_BUILD_BACKENDS" "${AUDIT_EXTRA[@]}"
for i in "${!STEP_KIND[@]}"; do
  case "${STEP_KIND[$i]}" in
    suite) run_sweep "${STEP_ARG[$i]}" "${STEP_CASE_S[$i]}" "$(keep_after "$i")" ;;
    gpu-tests) run_gpu_tests "$(keep_after "$i")" ;;
  esac
done
[ -n "$AUDIT" ] && run_byte_audit "$OUT/byte_audit_ext.json" 200 0 "${AUDIT_SUITES[@]}" --backends "$EXT_BACKENDS" \
    "${AUDIT_EXTRA[@]}"
collect_build_logs
[ ${#SUITES[@]} -gt 0 ] && summary
end_call
