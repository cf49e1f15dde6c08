#!/usr/bin/env bash
# After device_run_all.sh: the cases it left (resumed from RESUME_FROM, so only those run), the byte
# audit of the backends that need the compiled extensions (one case per backend and op of suites A
# and B), and the gpu-marked tests. The extensions come from this machine's earlier build when it is
# still warm, else from the carried .prebuilt/ (device_run_all.sh's $OUT/ext/), else are built.
#
# Device tool: command "bash scripts/device_finish.sh", carry [".sdist", ".whl", ".prebuilt"].
# Environment as device_run_all.sh. Writes $OUT/results/run-*.json(l) (only when cases were left),
# $OUT/finish.log, $OUT/byte_audit_ext.json.
cd "$(dirname "$0")/.." || exit 1
source scripts/device_common.sh
exec > >(tee -a "$OUT/finish.log") 2>&1
say "finishing on $(hostname); $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null)"
select_hw
stage_package
start_builds selective_scan_cuda causal_conv1d_cuda
install_python_parts
check_imports
run_sweep measure/suites/default_h200_a.yaml 300
run_sweep measure/suites/default_h200_b.yaml 240
AUDIT_MAX_S=240 run_byte_audit "$OUT/byte_audit_ext.json" --suite measure/suites/default_h200_a.yaml \
    --suite measure/suites/default_h200_b.yaml --backends 'mamba_ssm.*,causal_conv1d.*'
run_gpu_tests 200
collect_build_logs
summary
