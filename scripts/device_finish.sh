#!/usr/bin/env bash
# After device_run_all.sh: the cases it left (resumed from RESUME_FROM, so only those run), the byte
# audit of the backends that need the compiled extensions (one case per backend and op of suites A
# and B), and the gpu-marked tests. The extensions come from this machine's earlier build when it is
# still warm, else from the carried .prebuilt/ (device_run_all.sh's $OUT/ext/, or part of it: the
# device tool carries at most 64 MiB, so only causal_conv1d_cuda, the slow build, may fit), else are
# built. Suite B's leftovers run by kind, the causal-conv1d kernels first (they need no mamba-ssm
# while selective_scan_cuda compiles) and the Mamba-3 block last: its training step gave no result
# for 190 s in the first call and ignored SIGINT, so every sweep here has a per-case watchdog.
#
# Device tool: command "bash scripts/device_finish.sh", carry [".sdist", ".whl", ".prebuilt"].
# Environment as device_run_all.sh. Writes $OUT/results/run-*.json(l) (one file per sweep that ran
# cases), $OUT/finish.log, $OUT/byte_audit_ext.json.
cd "$(dirname "$0")/.." || exit 1
source scripts/device_common.sh
exec > >(tee -a "$OUT/finish.log") 2>&1
say "finishing on $(hostname); $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null)"
select_hw
stage_package
start_builds selective_scan_cuda causal_conv1d_cuda
install_python_parts
check_imports
B=measure/suites/default_h200_b.yaml
run_sweep measure/suites/default_h200_a.yaml 420 --case-timeout 120
run_sweep $B 400 --case-timeout 120 --filter causal_conv1d.causal_conv1d
run_sweep $B 360 --case-timeout 120 --filter block:mamba1/
run_sweep $B 330 --case-timeout 120 --filter block:mamba2/
run_sweep $B 240 --case-timeout 90
run_gpu_tests 150
AUDIT_MAX_S=200 run_byte_audit "$OUT/byte_audit_ext.json" --suite measure/suites/default_h200_a.yaml \
    --suite $B --backends 'mamba_ssm.*,causal_conv1d.*'
collect_build_logs
summary
