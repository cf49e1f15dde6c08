#!/usr/bin/env bash
# Regenerates results/h200/2026-12-02/calibration/ from the stored H200 results (no GPU needed):
# the calibrated profile, the gap report (Markdown and JSON) and its figure. Inputs: the default
# suites of 2026-12-02 and the #13 suites of 2026-12-03 (more shapes per group; calls 1 and 2 of
# results/h200/2026-12-03/achievable, measured on another machine of the same kind).
set -euo pipefail
cd "$(dirname "$0")/.."
IN=results/h200/2026-12-02
MORE=results/h200/2026-12-03/achievable
OUT=$IN/calibration
mkdir -p "$OUT"
ssmbench calibrate --results "$IN/default" "$IN/calibration-torchref" "$MORE/call1" "$MORE/call2" --hw h200-sxm --out "$OUT/profile.json" --force
ssmbench gap --results "$IN/default" "$IN/calibration-torchref" "$MORE/call1" "$MORE/call2" --hw h200-sxm --calibration "$OUT/profile.json" \
    --format md --out "$OUT/gap.md" --plot "$OUT/gap.png"
ssmbench gap --results "$IN/default" "$IN/calibration-torchref" "$MORE/call1" "$MORE/call2" --hw h200-sxm --calibration "$OUT/profile.json" \
    --format json --out "$OUT/gap.json"
