#!/usr/bin/env bash
# Suite B's Mamba-3 block training step (forward and backward, B=2 L=2048 D=2048) alone, with all the
# time this call has as its watchdog limit: it gave no result within 90, 130 and 190 s in three calls,
# while the first Mamba-3 forward on a fresh machine takes ~80 s of Triton compiling and autotuning.
# A longer limit tells a slow first compile from a hang; the watchdog's record says where the case
# was (innermost Python frames) and the log holds every thread's stack.
# Needs only selective_scan_cuda (mamba-ssm's __init__ imports it; Mamba-3 has no causal conv):
# carry it as .prebuilt/ (device_gpu_tests.sh's $OUT/ext/) so that no build delays the case.
#
# Device tool: command "RESUME_FROM=results/h200/2026-12-02/default bash scripts/device_mamba3_train.sh",
# carry [".sdist", ".whl", ".prebuilt"]. Writes $OUT/results/run-*.json(l), $OUT/mamba3_train.log.
cd "$(dirname "$0")/.." || exit 1
source scripts/device_common.sh
begin_call mamba3_train.log "Mamba-3 block training step"
start_builds selective_scan_cuda
install_python_parts
check_imports
CASE_LIMIT=$(case_limit_left)
if [ "$CASE_LIMIT" -ge 60 ]; then
  run_sweep measure/suites/default_h200_b.yaml 0 --case-timeout "$CASE_LIMIT" \
      --filter block:mamba3/siso/mamba_ssm.Mamba3/bf16/fwdbwd
else say "skipped: ${CASE_LIMIT} s would be left for the case"; fi
collect_build_logs
summary
