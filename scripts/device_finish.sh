#!/usr/bin/env bash
# After device_run_all.sh: suite B's cases that it left (resumed from RESUME_FROM, so only those
# run), by kind: the causal-conv1d kernels (they wait for causal_conv1d_cuda, ~4.7-6 min to build on
# a fresh machine), the Mamba2 block, the Mamba3 block's decode step; then the gpu-marked tests; then
# the rest, last the Mamba-3 block's training step, which gave no result within 190 s and 90 s in two
# calls (it ignored SIGINT): every sweep has a per-case watchdog, and one that fires ends only its own
# sweep. Last, if asked (AUDIT=1), the byte audit of the extension backends.
# Suite A is not run again: it is complete, and resuming retries its 'unavailable' cases (SDPA's
# efficient backend has no kernel for them), ~5 s each.
# The extensions come from this machine's earlier build when it is still warm, else from a carried
# .prebuilt/ (device_run_all.sh's $OUT/ext/; the device tool carries at most 64 MiB, so only
# causal_conv1d_cuda's ~22 MB part fits beside the tree), else are built.
#
# Device tool: command "bash scripts/device_finish.sh", carry [".sdist", ".whl"] (and ".prebuilt").
# Environment as device_run_all.sh. Writes $OUT/results/run-*.json(l) (one file per sweep that ran
# cases), $OUT/finish.log, and with AUDIT=1 $OUT/byte_audit_ext.json.
cd "$(dirname "$0")/.." || exit 1
source scripts/device_common.sh
begin_call finish.log "finishing"
start_builds selective_scan_cuda causal_conv1d_cuda
install_python_parts
check_imports
B=measure/suites/default_h200_b.yaml
SWEEP_MAX_S=430 run_sweep $B 0 --case-timeout 120 --filter causal_conv1d.causal_conv1d
SWEEP_MAX_S=150 run_sweep $B 0 --case-timeout 120 --filter block:mamba2/
SWEEP_MAX_S=60 run_sweep $B 0 --case-timeout 50 --filter block:mamba3/siso/mamba_ssm.Mamba3/bf16/decode
run_gpu_tests 150
# Last, the rest: the Mamba-3 block's training step, with all the time left as its watchdog limit
# (a longer limit than the 90 s and 190 s it was given tells a slow autotune from a hang).
CASE_LIMIT=$(case_limit_left)
[ "$CASE_LIMIT" -gt 450 ] && CASE_LIMIT=450
if [ "$CASE_LIMIT" -ge 30 ]; then run_sweep $B 0 --case-timeout "$CASE_LIMIT"
else say "rest of suite B skipped: ${CASE_LIMIT} s would be left for a case"; fi
if [ -n "${AUDIT:-}" ]; then
  AUDIT_MAX_S=200 run_byte_audit "$OUT/byte_audit_ext.json" --suite measure/suites/default_h200_a.yaml \
      --suite $B --backends 'mamba_ssm.*,causal_conv1d.*'
fi
collect_build_logs
summary
