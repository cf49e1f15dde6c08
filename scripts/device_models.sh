#!/usr/bin/env bash
# One device call for issue #15 (whole models): the runtime probe, then a model suite, within the deadline.
# the extensions the suite needs (selective_scan_cuda ~150 s, causal_conv1d_cuda ~350-420 s) compile in the background
# while the suite's first entries (Hugging Face transformers, no mamba-ssm) run; before building a model
# the runner waits on the status file of each build that model needs (measure/models/build.needed_extensions,
# measure/extensions.ensure_extension), and never imports a module still being built (on 2026-12-03 the
# build folder imported as an empty namespace package: 'selective_scan_cuda' has no 'fwd'). Every
# finished record is on disk at once.
usage() {
  cat <<'EOF2'
Usage: bash scripts/device_models.sh [OPTIONS]      (on the GPU machine, with $OUT set)

  --suite FILE     the model suite (default measure/suites/models/models_h200.yaml)
  --no-probe       skip the runtime probe (launch.host.hf_module, launch.host.compiled)
  --deadline S     the whole call ends within S seconds (default 450)
  --help           this text
Writes $OUT/device_models.log, $OUT/models/model-run-*.json, $OUT/probe-runtime-<spec>.yaml.
Device tool: carry .sdist, .whl and .prebuilt (causal_conv1d_cuda).
EOF2
}
cd "$(dirname "$0")/.." || exit 1
source scripts/device_lib.sh
DEADLINE_S=450
SUITE=measure/suites/models/models_h200.yaml PROBE=1
bad() { echo "device_models.sh: $*" >&2; exit 2; }
ARGS="$*"
while [ $# -gt 0 ]; do
  case "$1" in
    --help|-h) usage; exit 0 ;;
    --no-probe) PROBE='' ;;
    --suite) [ $# -ge 2 ] && [ -f "$2" ] || bad "--suite needs an existing file"; SUITE=$2; shift ;;
    --deadline) [[ ${2:-} =~ ^[1-9][0-9]*$ ]] || bad "--deadline needs whole seconds"; DEADLINE_S=$2; shift ;;
    *) bad "unknown option '$1'" ;;
  esac
  shift
done
"$PY" -c "import yaml" 2>/dev/null || bad "python3 lacks pyyaml"

NCPU=$(nproc 2>/dev/null || echo 16)
PIN_MEASURE=() PIN_BUILD=()
if command -v taskset >/dev/null && [ "$NCPU" -ge 6 ]; then  # host times are not measured against compilers
  PIN_MEASURE=(taskset -c 0-3) PIN_BUILD=(taskset -c "4-$((NCPU - 1))")
fi
begin_call device_models.log "device_models.sh $ARGS"
unpack_extensions
install_python_parts   # first: reading the suite imports the package, which needs the wheels (pint, pydantic)
# only the extensions the suite's entries import (measure/models/build.needed_extensions): a suite of Hugging Face
# transformers alone compiles nothing, so no compiler shares the host with its measurements
NEEDED=$("$PY" -c 'import sys
from ssmbench.measure.models.build import needed_extensions
from ssmbench.measure.models.suite import load_suite
print(" ".join(sorted({m for e in load_suite(sys.argv[1]).entries for m in needed_extensions(e)})))' "$SUITE") \
    || bad "cannot read the suite $SUITE"
say "extensions the suite needs: ${NEEDED:-none}"
TODO=()
for m in $NEEDED; do
  if [ -f "$EXT/$m.so" ] && grep -qs '"state": "done"' "$EXT/$m.status.json"; then say "$m: already built"
  else TODO+=("$m"); fi
done
if [ ${#TODO[@]} -gt 0 ]; then
  say "starting background builds: ${TODO[*]} (pinned: ${PIN_BUILD[*]:-no})"
  "${PIN_BUILD[@]}" "$PY" -m ssmbench.measure.extensions build --ext "${TODO[@]}" --sdist-dir .sdist \
      --build-dir "$EXT" --arch 90 --jobs "${BUILD_JOBS:-12}" --background
fi
select_hw
check_imports
export SSMBENCH_EXT_WAIT_S=$(( $(remaining) - 60 ))
if [ -n "$PROBE" ]; then
  say "runtime probe (hf_module, compiled)"
  timeout -k 5 90 "${PIN_MEASURE[@]}" "$PY" -m ssmbench.measure.models.runtime_probe --out "$OUT/probe-runtime-$HW.yaml" \
      || say "runtime probe ended with exit $?"
fi
LEFT=$(( $(remaining) - 25 ))
say "model suite $SUITE (no case starts after $(( LEFT - 20 )) s; killed at $LEFT s)"
timeout -k 10 "$LEFT" "${PIN_MEASURE[@]}" "$PY" -m ssmbench.measure.models.runner --suite "$SUITE" --out "$OUT/models" \
    --deadline $(( LEFT - 20 )) || say "model suite ended with exit $?"
collect_build_logs
end_call
