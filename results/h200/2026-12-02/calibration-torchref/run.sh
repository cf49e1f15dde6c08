#!/usr/bin/env bash
# Measure the calibration suite on the H200 with the torch_ref backends; results go to $OUT/res.
set -eo pipefail
ROOT=$(pwd)
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
python3 -m pip install -q --no-deps --no-build-isolation --no-index --no-compile --target /tmp/site2 . 2>&1 | tail -3
export PYTHONPATH=/tmp/site2:/tmp/site PYTHONUNBUFFERED=1
cd /tmp   # the repository's ssmbench/ folder would shadow the installed package
python3 -c "import ssmbench.measure.runners, ssmbench.calibrate.join; print('imports ok')"
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,power.draw --format=csv
python3 -c "import sys, ssmbench.cli as c; c.COMMAND_MODULES=('ssmbench.measure.commands',); sys.exit(c.main(sys.argv[1:]))" \
  measure --suite "$ROOT/.calib_h200/suite.yaml" --device cuda --out "$OUT/res" --hw h200-sxm --no-energy --target-time ${TARGET:-0.1} ${EXTRA:-} 2>&1 | tee "$OUT/measure.log" | tail -n 40
