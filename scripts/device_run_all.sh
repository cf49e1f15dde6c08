#!/usr/bin/env bash
# Parts A and B of the default H200 measurement in one device call (for a session whose device
# budget allows only one long call): probe ceilings first, both extension builds in the background
# (10 jobs on 16 cores, so the launch-bound cases keep CPU cores to themselves), then suite A (no
# causal-conv1d needed), then suite B. Every finished case is on disk if the call is cut off.
# Device tool: command "bash scripts/device_run_all.sh", carry [".sdist", ".whl"].
cd "$(dirname "$0")/.." || exit 1
source scripts/device_common.sh
exec > >(tee -a "$OUT/run_all.log") 2>&1
say "parts A+B on $(hostname); $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null)"
stage_package
install_python_parts
check_imports
if [ -n "${PREV_RESULTS:-}" ]; then  # a continued run: earlier result files, carried in, are resumed
  cp "$PREV_RESULTS"/run-*.json* "$OUT/results/" && export RESUME=1 && say "resuming from $(ls "$PREV_RESULTS")"
fi
if [ -z "${SKIP_PROBE:-}" ]; then
  say "probe (before the builds start, so that launch latency is read on an idle CPU)"
  timeout 90 $PY -c "import sys; from ssmbench.cli import main; sys.exit(main(sys.argv[1:]))" \
      probe --device cuda --out "$OUT/probe-h200.yaml" || say "probe ended with exit $?"
fi
say "starting background builds (10 jobs)"
$PY -m ssmbench.measure.build_extensions build --ext selective_scan_cuda causal_conv1d_cuda --sdist-dir .sdist \
    --build-dir "$EXT" --arch 90 --jobs 10 --background
run_sweep measure/suites/default_h200_a.yaml 200
run_sweep measure/suites/default_h200_b.yaml 0
collect_build_logs
summary
