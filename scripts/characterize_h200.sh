#!/usr/bin/env bash
# Regenerates results/h200/2026-12-03/models/characterize/ from the stored whole-model run of 2026-12-03
# (no GPU needed): `ssmbench characterize` against the achievable estimate of h200-sxm (the spec named by
# the run's device) and the calibrated estimate of results/h200/2026-12-02/calibration/profile.json,
# as Markdown, JSON and a plot; then the per-module host cost of Hugging Face eager measured from the
# host-bound records and its held-out errors (scripts/model_host_cost.py).
set -euo pipefail
cd "$(dirname "$0")/.."
RUN=results/h200/2026-12-03/models
PROFILE=results/h200/2026-12-02/calibration/profile.json
OUT=$RUN/characterize
mkdir -p "$OUT"
rm -f "$OUT/characterize.md" "$OUT/characterize.json" "$OUT/characterize.png" "$OUT/hf_module.md" "$OUT/hf_module.json" \
    "$OUT/measured-hf_module-h200-sxm.yaml"
ssmbench characterize --results "$RUN" --calibration "$PROFILE" --format md --out "$OUT/characterize.md" \
    --plot "$OUT/characterize.png"
ssmbench characterize --results "$RUN" --calibration "$PROFILE" --format json --out "$OUT/characterize.json"
"${PYTHON:-python}" scripts/model_host_cost.py --results "$RUN" --out "$OUT"
