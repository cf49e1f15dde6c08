#!/usr/bin/env bash
# Part B of the default H200 measurement (measure/suites/default_h200_b.yaml): GEMM / norms / MLP,
# PyTorch conv, Mamba-2 SSD decode, Mamba-3 SISO, causal-conv1d and the blocks; then a byte audit.
# Both extensions are compiled in the background from the start (causal_conv1d_cuda takes ~6 min:
# its cases and the blocks come last in the suite).
# Device tool: command "bash scripts/device_run_b.sh", carry [".sdist", ".whl"].
# Writes $OUT/results/run-*.json, $OUT/run_b.log, $OUT/byte_audit_b.json.
cd "$(dirname "$0")/.." || exit 1
source scripts/device_common.sh
exec > >(tee -a "$OUT/run_b.log") 2>&1
select_hw
say "part B on $(hostname); $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null)"
stage_package
start_builds selective_scan_cuda causal_conv1d_cuda
install_python_parts
check_imports
run_sweep measure/suites/default_h200_b.yaml 0 --case-timeout 150
run_byte_audit "$OUT/byte_audit_b.json" --suite measure/suites/default_h200_b.yaml
collect_build_logs
summary
