#!/usr/bin/env bash
# The default measurement (suites A and B) in one device call: both extension builds start first, in
# the background; while they compile, the Python parts install, the probe runs (unless the earlier
# results hold this device's) and the byte audit profiles the backends that need no extension; then
# suite A, then suite B (each suite orders its cases so that what needs no extension comes first,
# causal-conv1d last). Every finished case is on disk at once, so a cut-off call keeps its cases;
# the built extensions come back packed in $OUT/ext/ for a later call on a fresh machine.
#
# Device tool: command "bash scripts/device_run_all.sh", carry [".sdist", ".whl"] (and ".prebuilt"
# when it holds packed extensions). Environment:
#   RESUME_FROM="dir ..."  folders of earlier result files: their finished cases of this device are skipped
#   SSMBENCH_SOURCE_COMMIT / SSMBENCH_SOURCE_DIRTY  the commit of the sent tree (the copy has no .git)
#   HW=<spec id>           the spec for roofline fractions, where the device's name is not known
# Writes $OUT/results/run-*.json(l), $OUT/run_all.log, $OUT/byte_audit_noext.json, $OUT/ext/*,
# and $OUT/probe-<spec>.yaml when the probe runs.
cd "$(dirname "$0")/.." || exit 1
source scripts/device_common.sh
begin_call run_all.log "parts A+B"
start_builds selective_scan_cuda causal_conv1d_cuda
pack_extensions
install_python_parts
check_imports
probe_unless_known
AUDIT_MAX_S=150 run_byte_audit "$OUT/byte_audit_noext.json" --suite measure/suites/default_h200_a.yaml \
    --suite measure/suites/default_h200_b.yaml --exclude-backends 'mamba_ssm.*,causal_conv1d.*,flash_attn.*'
run_sweep measure/suites/default_h200_a.yaml 170 --case-timeout 150
run_sweep measure/suites/default_h200_b.yaml 0 --case-timeout 150
collect_build_logs
summary
