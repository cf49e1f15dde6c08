#!/usr/bin/env bash
# Regenerates results/h200/2026-12-03/models/characterize/ from the stored whole-model runs of 2026-12-03
# (no GPU needed): the runtime terms measured from the records (scripts/model_host_cost.py: the
# measured-runtime fragment the h200-sxm spec's entries are copied from), then `ssmbench characterize
# --held-out` (each model predicted with the runtime terms of the other models' records) against the
# achievable estimate of h200-sxm and the calibrated estimate of
# results/h200/2026-12-02/calibration/profile.json, as Markdown, JSON and a plot; and the same
# characterization with the spec's own (in-sample) values; and whether the host reference beside the host-bound
# records explains their distance from the estimate (scripts/host_reference_check.py); and two tables of the profiled
# kernels: how far each library's kernel times move between sessions (scripts/kernel_repeat.py) and the SSD's five
# kernels against their stages' achievable estimates (scripts/ssd_stage_gap.py). The model runs are both calls of 2026-12-03
# (models, models-b), the calls of 2026-12-04 (host-noise*, prefill-check, host-sync: a key measured three
# times or more stands for the median of its records, measure/models/records.standing_records) and the training
# steps of 2026-12-05 with their host issue times (train-issue) unless RUNS names other folders.
set -euo pipefail
cd "$(dirname "$0")/.."
RUN=results/h200/2026-12-03/models
RUNS=${RUNS:-"$RUN results/h200/2026-12-03/models-b results/h200/2026-12-04/host-noise results/h200/2026-12-04/host-noise-b results/h200/2026-12-04/host-noise-hf results/h200/2026-12-04/prefill-check results/h200/2026-12-04/host-sync results/h200/2026-12-05/train-issue"}
# the op-level folders whose block:mamba1/2/3 forward cases give the mamba-ssm modules' forward host terms
BLOCKS="results/h200/2026-12-02/default results/h200/2026-12-03/pairs-blocks results/h200/2026-12-03/fill"
PROFILE=results/h200/2026-12-02/calibration/profile.json
OUT=$RUN/characterize
mkdir -p "$OUT"
rm -f "$OUT"/characterize*.md "$OUT"/characterize*.json "$OUT/characterize.png" "$OUT/hf_module.md" "$OUT/hf_module.json" \
    "$OUT"/measured-*.yaml "$OUT"/runtime_terms.* "$OUT/host_reference_check.md" "$OUT"/kernel_repeat.* \
    "$OUT"/ssd_stage_gap.*
# shellcheck disable=SC2086
"${PYTHON:-python}" scripts/model_host_cost.py --results $RUNS --block-results $BLOCKS --out "$OUT"
# shellcheck disable=SC2086
ssmbench characterize --results $RUNS --calibration "$PROFILE" --held-out --format md --out "$OUT/characterize.md" \
    --plot "$OUT/characterize.png"
# shellcheck disable=SC2086
ssmbench characterize --results $RUNS --calibration "$PROFILE" --held-out --format json --out "$OUT/characterize.json"
# shellcheck disable=SC2086
ssmbench characterize --results $RUNS --calibration "$PROFILE" --format md --out "$OUT/characterize-in-sample.md"
# shellcheck disable=SC2086
"${PYTHON:-python}" scripts/host_reference_check.py $RUNS > "$OUT/host_reference_check.md"
echo "wrote $OUT/host_reference_check.md"
# shellcheck disable=SC2086
"${PYTHON:-python}" scripts/kernel_repeat.py $RUNS --json "$OUT/kernel_repeat.json" > "$OUT/kernel_repeat.md"
echo "wrote $OUT/kernel_repeat.md"
# shellcheck disable=SC2086
"${PYTHON:-python}" scripts/ssd_stage_gap.py $RUNS --json "$OUT/ssd_stage_gap.json" > "$OUT/ssd_stage_gap.md"
echo "wrote $OUT/ssd_stage_gap.md"
