#!/usr/bin/env bash
# Regenerate the committed H200 go/no-go report (issue #16) from the stored measurements: HTML (one
# self-contained file) and Markdown (with report_figures/ beside it) under results/h200/2026-12-03/report/.
# Never edit those files by hand: change the data or the code and run this script again.
# Usage: bash scripts/report_h200.sh [python]   (default: python3)
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${1:-python3}
OUT=results/h200/2026-12-03/report
MAX_HTML_BYTES=5000000   # the HTML embeds its figures; keep it small enough to open and to commit
mapfile -t FOLDERS < <(grep -v '^\s*#' scripts/report_h200_folders.txt | grep -v '^\s*$')
mkdir -p "$OUT"
rm -rf "$OUT/report_figures"
for fmt in html md; do
  "$PY" -m ssmbench report --results "${FOLDERS[@]}" --hw h200-sxm \
    --calibration results/h200/2026-12-02/calibration/profile.json --out "$OUT/report.$fmt"
done
size=$(stat -c %s "$OUT/report.html")
if [ "$size" -ge "$MAX_HTML_BYTES" ]; then
  echo "report_h200.sh: $OUT/report.html is $size bytes, over the $MAX_HTML_BYTES-byte limit" >&2
  exit 1
fi
echo "report_h200.sh: wrote $OUT/report.html ($size bytes), $OUT/report.md and $OUT/report_figures/" >&2
