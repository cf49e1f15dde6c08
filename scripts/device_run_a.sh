#!/usr/bin/env bash
# Part A of the default H200 measurement (measure/suites/default_h200_a.yaml): attention (SDPA),
# gated delta rule (fla), Mamba-1 selective scan and decode, Mamba-2 SSD; then a byte audit (ncu).
# selective_scan_cuda is compiled in the background while the cases that need no extension run.
# Device tool: command "bash scripts/device_run_a.sh", carry [".sdist", ".whl"].
# Writes $OUT/results/run-*.json, $OUT/run_a.log, $OUT/byte_audit_a.json.
cd "$(dirname "$0")/.." || exit 1
source scripts/device_common.sh
begin_call run_a.log "part A"
start_builds selective_scan_cuda
install_python_parts
check_imports
run_sweep measure/suites/default_h200_a.yaml 50 --case-timeout 150
run_byte_audit "$OUT/byte_audit_a.json" --suite measure/suites/default_h200_a.yaml
collect_build_logs
summary
