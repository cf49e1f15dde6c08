#!/usr/bin/env bash
# Second H200 run: the torch_ref suite again (repeat measurements, validation) and attention / conv1d.
set -eo pipefail
ROOT=$(pwd)
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
python3 -m pip install -q --no-deps --no-build-isolation --no-index --no-compile --upgrade --target /tmp/site2 . 2>&1 | tail -3
export PYTHONPATH=/tmp/site2:/tmp/site PYTHONUNBUFFERED=1
cd /tmp
M() { python3 -c "import sys, ssmbench.cli as c; c.COMMAND_MODULES=('ssmbench.measure.commands',); sys.exit(c.main(sys.argv[1:]))" "$@"; }
M measure --suite "$ROOT/.calib_h200/suite2.yaml" --device cuda --out "$OUT/res2" --hw h200-sxm --no-energy --target-time 0.1 --json > "$OUT/res2.log" 2>&1 || echo "suite2 rc=$?"
tail -c 1500 "$OUT/res2.log"
M measure --suite "$ROOT/.calib_h200/suite.yaml" --device cuda --out "$OUT/res1b" --hw h200-sxm --no-energy --target-time 0.1 --seed 1 --json > "$OUT/res1b.log" 2>&1 || echo "suite1 rc=$?"
tail -c 300 "$OUT/res1b.log"
