#!/usr/bin/env bash
# One device call: where a model suite's eager steps spend their host time, by operator
# (measure/models/host_profile.py), after building the extensions the suite needs (in the background, on every
# core; the profile waits for them: measure/models/build.wait_for_extensions, so nothing is measured while
# they build). Writes $OUT/device_host_profile.log and $OUT/host-profile.json.
# Usage (on the GPU machine, $OUT set; carry .sdist and .whl): bash scripts/device_host_profile.sh SUITE
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
if [ $# -ne 1 ] || [ ! -f "$1" ]; then
  echo "usage: bash scripts/device_host_profile.sh SUITE (an existing model suite)" >&2
  exit 2
fi
SUITE=$1
source scripts/device_lib.sh
begin_call device_host_profile.log "device_host_profile.sh $SUITE"
install_python_parts
NEEDED=$("$PY" -c 'import sys
from ssmbench.measure.models.build import needed_extensions
from ssmbench.measure.models.suite import load_suite
print(" ".join(sorted({m for e in load_suite(sys.argv[1]).entries for m in needed_extensions(e)})))' "$SUITE") \
    || { say "cannot read the suite $SUITE"; exit 2; }
say "extensions the suite needs: ${NEEDED:-none}"
if [ -n "$NEEDED" ]; then
  # shellcheck disable=SC2086
  "$PY" -m ssmbench.measure.extensions build --ext $NEEDED --sdist-dir .sdist --build-dir "$EXT" --arch 90 \
      --jobs "${BUILD_JOBS:-16}" --background || say "starting the builds ended with exit $?"
fi
select_hw
check_imports
LEFT=$(( $(remaining) - 10 ))
export SSMBENCH_EXT_WAIT_S=$(( LEFT - 40 ))
say "host profile of $SUITE (killed at $LEFT s)"
timeout -k 5 "$LEFT" taskset -c 0-3 "$PY" -m ssmbench.measure.models.host_profile --suite "$SUITE" \
    --out "$OUT/host-profile.json" || say "host profile ended with exit $?"
collect_build_logs
end_call
