#!/usr/bin/env bash
# One device call: build a restricted FlashAttention-3 (sm_90a, bf16, head dims 64 and 128; see
# scripts/prepare_fa3_sources.sh and scripts/fa3_build.py) from the carried sources within a deadline,
# then, if it built, check it against SDPA and time it (measure/suites/fa3_h200.yaml) as result files;
# if it did not, record why. The outcome is JSON either way.
usage() {
  cat <<'EOF'
Usage: bash scripts/device_fa3.sh [OPTIONS]      (on the GPU machine, with $OUT set)

Needs .fa3src/fa3src.tar.xz (bash scripts/prepare_fa3_sources.sh, run beforehand where the mirrors are),
and .sdist/ and .whl/ as scripts/device.sh does. With .fa3prebuilt/ holding an earlier call's $OUT/fa3/
parts, the build is skipped and that module is used.

  --build-deadline S  the FA3 build stops after S seconds (default 480)
  --deadline S        the whole call ends within S seconds (default 575; the device tool allows 600)
  --jobs N            parallel compiles (ninja's MAX_JOBS; default: the CPU count)
  --bwd               also build the backward (two more instantiation files) and time training steps
                      (measure/suites/fa3_h200_train.yaml)
  --no-measure        build (and check) only
  --suite FILE        time this suite instead of fa3_h200 (and fa3_h200_train with --bwd); repeatable,
                      run in the order given (e.g. measure/suites/fill_fa3_h200.yaml with a module
                      carried in .fa3prebuilt/ that has the backward)
  --help              this text

Writes $OUT/fa3.log (everything), $OUT/fa3_build.json (status built | failed | timeout | prebuilt, the
stage where it stopped, seconds, ninja progress, log tail, errors, the setup.py switches),
$OUT/fa3_build.log (setup.py's output), and if it built: $OUT/fa3_check.json (FA3 vs SDPA, the gate's
rule), $OUT/results/run-*.json(l) (the suite: FA3 and SDPA at the matched pairs' attention points), and
$OUT/fa3/fa3_prebuilt.tar.xz.part* (the built module, to carry as .fa3prebuilt/ next time).
EOF
}

cd "$(dirname "$0")/.." || exit 1
source scripts/device_lib.sh

bad() {
  echo "device_fa3.sh: $*" >&2
  echo "run 'bash scripts/device_fa3.sh --help' for the options" >&2
  exit 2
}
whole() { [[ ${2:-} =~ ^[1-9][0-9]*$ ]] || bad "$1 needs a positive whole number, got '${2:-}'"; }

DEADLINE_S=575 BUILD_S=480 JOBS=$(nproc 2>/dev/null || echo 8) BWD='' MEASURE=1 SUITES=()
KEEP_AFTER_BUILD_S=60   # kept after the build for the check and the packing of the module
ARGS="$*"
while [ $# -gt 0 ]; do
  opt=$1
  case "$opt" in
    --help|-h) usage; exit 0 ;;
    --build-deadline|--deadline|--jobs) [ $# -ge 2 ] || bad "$opt needs a value"; whole "$opt" "$2" ;;
    --suite) [ $# -ge 2 ] || bad "$opt needs a value"; [ -f "$2" ] || bad "--suite $2: no such file" ;;
  esac
  case "$opt" in
    --build-deadline) BUILD_S=$2; shift ;;
    --deadline) DEADLINE_S=$2; shift ;;
    --jobs) JOBS=$2; shift ;;
    --bwd) BWD=1 ;;
    --no-measure) MEASURE='' ;;
    --suite) SUITES+=("$2"); shift ;;
    *) bad "unknown option '$opt'" ;;
  esac
  shift
done
[ "$BUILD_S" -lt "$DEADLINE_S" ] || bad "--build-deadline $BUILD_S must be less than --deadline $DEADLINE_S"

SRC=$TMP/fa3src
HOPPER=$SRC/fa3/hopper
# the carried folders (the script's tests point them away from a checkout's carry data)
FA3SRC_DIR=${FA3SRC_DIR:-.fa3src} FA3PREBUILT_DIR=${FA3PREBUILT_DIR:-.fa3prebuilt}
BUILD_JSON=$OUT/fa3_build.json

fail_json() {  # $1: stage, $2: reason
  "$PY" - "$BUILD_JSON" "$1" "$2" "$(elapsed)" <<'PYEOF'
import json, sys
out, stage, reason, secs = sys.argv[1:]
json.dump({"status": "failed", "stage": stage, "reason": reason, "seconds": float(secs)}, open(out, "w"), indent=1)
PYEOF
}

unpack_sources() {
  local pack=$FA3SRC_DIR/fa3src.tar.xz
  [ -f "$pack" ] || { fail_json sources "no $pack: run bash scripts/prepare_fa3_sources.sh and carry .fa3src"; return 1; }
  rm -rf "$SRC" && mkdir -p "$SRC"
  xz -d < "$pack" | tar -C "$SRC" -xf - || { fail_json sources "could not unpack $pack"; return 1; }
  [ -f "$FA3SRC_DIR/manifest.json" ] && cp "$FA3SRC_DIR/manifest.json" "$OUT/fa3_sources.json"
  say "FA3 sources unpacked in $SRC: $(tr -d '\n' < "$FA3SRC_DIR/manifest.json" 2>/dev/null | head -c 400)"
}

use_prebuilt() {  # an earlier call's module, carried as .fa3prebuilt/
  local parts
  parts=$(ls "$FA3PREBUILT_DIR"/fa3_prebuilt.tar.xz.part* 2>/dev/null) || return 1
  [ -n "$parts" ] || return 1
  # shellcheck disable=SC2086
  cat $parts | xz -d | tar -C "$HOPPER" -xf - || { say "could not unpack .fa3prebuilt/: building instead"; return 1; }
  "$PY" - "$BUILD_JSON" "$HOPPER" <<'PYEOF'
import json, pathlib, sys
sys.path.insert(0, "scripts")
from fa3_build import _meta
so = sorted(pathlib.Path(sys.argv[2], "flash_attn_3").glob("_C*.so"))
json.dump({"status": "prebuilt", "stage": "done", "so": str(so[0]) if so else None, "seconds": 0.0,
           "note": "the module of an earlier call (.fa3prebuilt/), not compiled here", "meta": _meta()},
          open(sys.argv[1], "w"), indent=1)
PYEOF
  say "using the prebuilt FA3 module from .fa3prebuilt/"
}

pack_module() {  # the built module and its config, in parts of at most 15 MiB (the tool returns <= 16 MiB files)
  mkdir -p "$OUT/fa3"
  (cd "$HOPPER" && tar -cf - flash_attn_3/_C*.so flash_attn_config.py) | xz -T4 -3 \
    | split -b 15M -d - "$OUT/fa3/fa3_prebuilt.tar.xz.part"
  say "packed the module: $(ls -l "$OUT/fa3" | tail -n +2 | awk '{print $5, $9}' | tr '\n' ' ')"
}

begin_call fa3.log "device_fa3.sh $ARGS"
say "toolchain: $(nvcc --version 2>/dev/null | tail -n 2 | tr '\n' ' '); torch $("$PY" -c 'import torch; print(torch.__version__, torch.version.cuda)' 2>/dev/null)"
if ! unpack_sources; then say "no sources: see $BUILD_JSON"; end_call; exit 0; fi
BUILD_PID=''
if ! use_prebuilt; then
  b=$BUILD_S
  [ "$b" -gt $(( $(remaining) - KEEP_AFTER_BUILD_S )) ] && b=$(( $(remaining) - KEEP_AFTER_BUILD_S ))
  say "building FA3 in the background (deadline ${b} s, ${JOBS} jobs${BWD:+, with the backward}); setup.py's output: $OUT/fa3_build.log"
  "$PY" scripts/fa3_build.py build --src "$SRC/fa3" --out "$BUILD_JSON" --log "$OUT/fa3_build.log" \
      --deadline "$b" --jobs "$JOBS" ${BWD:+--bwd} &
  BUILD_PID=$!
fi
# while it compiles: the Python parts the measurement needs (the spec's schema imports pydantic)
install_python_parts
select_hw
check_imports
[ -n "$BUILD_PID" ] && { wait "$BUILD_PID"; say "build step ended (exit $?)"; }
[ -s "$BUILD_JSON" ] || fail_json "scripts/fa3_build.py" "the build step wrote no record (its output is in fa3.log)"
status=$("$PY" -c 'import json, sys; print(json.load(open(sys.argv[1]))["status"])' "$BUILD_JSON" 2>/dev/null)
if [ "$status" != built ] && [ "$status" != prebuilt ]; then
  say "FA3 not built ($status): $("$PY" -c 'import json, sys; d = json.load(open(sys.argv[1])); print(d["stage"], d.get("seconds"), "s")' "$BUILD_JSON" 2>/dev/null)"
  tail -n 30 "$OUT/fa3_build.log" 2>/dev/null
  end_call
  exit 0
fi
export PYTHONPATH=$HOPPER:$PYTHONPATH   # flash_attn_interface, flash_attn_config and flash_attn_3._C
timeout 60 "$PY" scripts/fa3_build.py check --out "$OUT/fa3_check.json" || say "FA3 check ended with exit $?"
[ "$status" = built ] && { pack_module & PACK_PID=$!; }  # end_call waits for it
if [ -n "$MEASURE" ] && [ ${#SUITES[@]} -gt 0 ]; then
  for i in "${!SUITES[@]}"; do run_sweep "${SUITES[$i]}" 60 $(( 40 * (${#SUITES[@]} - i - 1) )); done
  summary
elif [ -n "$MEASURE" ]; then
  keep=0; [ -n "$BWD" ] && keep=40
  run_sweep measure/suites/fa3_h200.yaml 60 "$keep"
  [ -n "$BWD" ] && run_sweep measure/suites/fa3_h200_train.yaml 60 0
  summary
fi
end_call
