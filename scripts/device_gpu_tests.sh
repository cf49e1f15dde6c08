#!/usr/bin/env bash
# The gpu-marked tests on a fresh machine, in two parts: those that need no mamba-ssm run while
# selective_scan_cuda compiles (mamba-ssm's package __init__ imports it, so every mamba-ssm test waits
# for it); then the mamba-ssm ones. On a fresh machine Triton compiles and autotunes each kernel
# first (the Mamba-3 and SSD ones take ~40-90 s), which is why these tests need minutes there.
# selective_scan_cuda comes back packed in $OUT/ext/ (carry it as .prebuilt/ next time: on its own it
# fits the device tool's 64 MiB carry limit beside the tree).
#
# Device tool: command "bash scripts/device_gpu_tests.sh", carry [".sdist", ".whl", ".prebuilt"]
# (.prebuilt: causal_conv1d_cuda packed by an earlier call). Writes $OUT/gpu_tests.log, $OUT/ext/.
cd "$(dirname "$0")/.." || exit 1
source scripts/device_common.sh
begin_call gpu_tests.log "gpu-marked tests"
start_builds selective_scan_cuda causal_conv1d_cuda
pack_extensions selective_scan_cuda
install_python_parts
check_imports
run_gpu_tests "${TESTS_A_MAX_S:-220}" -k "not mamba_ssm"
run_gpu_tests "${TESTS_B_MAX_S:-300}" -k "mamba_ssm"
collect_build_logs
end_call
