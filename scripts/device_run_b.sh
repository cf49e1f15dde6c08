#!/usr/bin/env bash
# Part B of the default H200 measurement (measure/suites/default_h200_b.yaml): GEMM / norms / MLP,
# PyTorch conv, Mamba-2 SSD decode, Mamba-3 SISO, causal-conv1d and the blocks; then a byte audit.
# Both extensions are compiled in the background from the start (causal_conv1d_cuda takes ~6 min:
# its cases and the blocks come last in the suite).
# Device tool: command "bash scripts/device_run_b.sh", carry [".sdist", ".whl"].
# Writes $OUT/results/run-*.json, $OUT/run_b.log, $OUT/byte_audit_b.json.
cd "$(dirname "$0")/.." || exit 1
source scripts/device_common.sh
begin_call run_b.log "part B"
start_builds selective_scan_cuda causal_conv1d_cuda
install_python_parts
check_imports
run_sweep measure/suites/default_h200_b.yaml 0 --case-timeout 150
run_byte_audit "$OUT/byte_audit_b.json" --suite measure/suites/default_h200_b.yaml
collect_build_logs
summary
