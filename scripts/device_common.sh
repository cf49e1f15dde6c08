# Shared steps of scripts/device_run_a.sh and device_run_b.sh (sourced, not run). On the H200 machine:
# repository root as cwd, $OUT set, no network, python3 = the interpreter that has torch.
# Needs the sdists in .sdist/ (and any wheels in .whl/): pass both in the device tool's `carry`.
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
export SSMBENCH_EXT_BUILD_DIR=$EXT
export PYTHONPATH=$PKG:$SITE:$EXT${PYTHONPATH:+:$PYTHONPATH}
mkdir -p "$OUT/results" "$EXT"

elapsed() { echo $(( $(date +%s) - T_START )); }
remaining() { echo $(( DEADLINE_S - $(elapsed) )); }
say() { echo "[$(elapsed) s] $*"; }

stage_package() {
  # The ssmbench package as pyproject.toml maps it (top-level folders -> ssmbench.<name>), copied
  # rather than pip-installed: no setuptools version or build step on the GPU machine matters.
  rm -rf "$PKG" && mkdir -p "$PKG/ssmbench"
  cp -r ssmbench/. "$PKG/ssmbench/"
  for d in hwspecs analytic measure calibrate figures; do cp -r "$d" "$PKG/ssmbench/$d"; done
}

check_imports() {  # after the wheels are installed (pydantic, pint, rich may come from .whl/)
  $PY -c "import ssmbench, ssmbench.measure.runners, ssmbench.measure.commands, ssmbench.hwspecs.loader; \
print('ssmbench staged at', ssmbench.__file__)" || say "ssmbench does not import: see above"
}

start_builds() {  # $@: extension modules
  say "starting background builds: $*"
  $PY -m ssmbench.measure.build_extensions build --ext "$@" --sdist-dir .sdist --build-dir "$EXT" \
      --arch 90 --jobs "$(nproc)" --background
}

install_python_parts() {
  say "installing .whl/*.whl, then mamba-ssm, causal-conv1d, fla-core (Python parts, no compiling)"
  timeout 300 $PY -m ssmbench.measure.build_extensions install --sdist-dir .sdist --wheel-dir .whl --target "$SITE" \
    || say "install FAILED (exit $?): the kernel backends will report Unavailable"
}

run_sweep() {  # $1: suite file; keeps 25 s (+ $2 s reserved for later steps) for what follows
  local budget=$(( $(remaining) - 25 - ${2:-0} ))
  export SSMBENCH_EXT_WAIT_S=$budget
  say "sweep $1 with a ${budget} s limit"
  timeout -s INT -k 20 "$budget" $PY - measure --suite "$1" --device cuda --out "$OUT/results" --hw h200-sxm \
      --target-time 0.3 --energy-window 1.0 ${RESUME:+--resume} <<'PYEOF'
import argparse, sys
from ssmbench.measure import commands  # called directly: works whether or not the CLI lists it yet
p = argparse.ArgumentParser(prog="ssmbench")
commands.register(p.add_subparsers(dest="command", required=True))
a = p.parse_args(sys.argv[1:])
sys.exit(a.func(a))
PYEOF
  say "sweep ended (exit $?)"
}

run_byte_audit() {  # $1: suite file, $2: output json
  local budget=$(( $(remaining) - 20 ))
  if [ "$budget" -lt 40 ]; then say "byte audit skipped: ${budget} s left"; return; fi
  local ncu
  ncu=$(command -v ncu || ls -d /opt/nvidia/nsight-compute/*/ncu /usr/local/cuda/bin/ncu 2>/dev/null | tail -n 1)
  if [ -z "$ncu" ]; then say "byte audit skipped: ncu not found"; return; fi
  say "byte audit of $1 with $ncu (${budget} s limit)"
  timeout -k 10 "$budget" $PY -m ssmbench.measure.byte_audit --suite "$1" --out "$2" --per-backend 1 \
      --ncu "$ncu" --timeout $(( budget - 10 )) || say "byte audit ended with exit $?"
}

collect_build_logs() {  # status files and the last lines of each build log, in one file
  for s in "$EXT"/*.status.json; do [ -f "$s" ] && { echo "== $s"; cat "$s"; echo; }; done > "$OUT/builds.txt" 2>&1
  for l in "$EXT"/*.log; do [ -f "$l" ] && { echo "== tail of $l"; tail -n 60 "$l"; }; done >> "$OUT/builds.txt" 2>&1
}

summary() {
  $PY scripts/summarize_results.py "$OUT/results" || true
  say "done"
  sleep 1  # let tee flush the log before the command returns
}
