#!/usr/bin/env bash
# Pack the sources of a restricted FlashAttention-3 build for scripts/device_fa3.sh (run here, not on the
# GPU machine, which has no network): flash-attention's hopper/ folder with only the instantiation files
# that build needs, its README.md (hopper/setup.py reads ../README.md), and the CUTLASS headers
# (include/: cute and cutlass) of the commit its csrc/cutlass submodule pins, into .fa3src/ (git-ignored;
# the device tool carries it: carry [".fa3src", ...]).
#
# The restriction (hopper/setup.py's FLASH_ATTENTION_DISABLE_* switches, set by scripts/fa3_build.py):
# sm_90a, bf16, head dims 64 and 128, causal and non-causal prefill; no split-KV, paged KV, append-KV,
# local (sliding window), softcap, PackGQA, FP8, FP16, varlen, clusters, sm_8x, or head-dim pairs
# (64/256, 64/512, 192/128). setup.py then compiles flash_api_stable.cpp (torch >= 2.9),
# flash_prepare_scheduler.cu, instantiations/flash_fwd_hdim{64,128}_bf16_sm90.cu and, unless the
# backward is disabled, instantiations/flash_bwd_hdim{64,128}_bf16_sm90.cu: only those instantiation
# files are packed, so a setup.py that asks for another fails at once, naming it.
#
# Usage: bash scripts/prepare_fa3_sources.sh [FLASH_ATTENTION_GIT_DIR [CUTLASS_GIT_DIR]]
#   defaults: the mirrors /work/.mirror/Dao-AILab+flash-attention/repo and /work/.mirror/NVIDIA+cutlass/repo
#   (git directories without a work tree). FA_COMMIT (default HEAD) picks the flash-attention commit.
#   CUTLASS at the pinned commit when the CUTLASS mirror holds it, else its newest commit (recorded).
# Writes .fa3src/fa3src.tar.xz and .fa3src/manifest.json (commits, files, sizes).
set -euo pipefail
cd "$(dirname "$0")/.."
FA=${1:-/work/.mirror/Dao-AILab+flash-attention/repo}
CUT=${2:-/work/.mirror/NVIDIA+cutlass/repo}
FA_COMMIT=${FA_COMMIT:-HEAD}
DEST=.fa3src
MAX_PACK_BYTES=$((40 * 1024 * 1024))   # the device tool carries at most ~60 MiB with the tree
NEEDED=(hopper/setup.py hopper/flash_api_stable.cpp hopper/flash_prepare_scheduler.cu hopper/flash_attn_interface.py
        hopper/flash_attn_3/__init__.py
        hopper/instantiations/flash_fwd_hdim64_bf16_sm90.cu hopper/instantiations/flash_fwd_hdim128_bf16_sm90.cu
        hopper/instantiations/flash_bwd_hdim64_bf16_sm90.cu hopper/instantiations/flash_bwd_hdim128_bf16_sm90.cu)

die() { echo "prepare_fa3_sources.sh: $*" >&2; exit 2; }
git -C "$FA" rev-parse --git-dir >/dev/null 2>&1 || die "$FA: not a git directory of flash-attention"
git -C "$CUT" rev-parse --git-dir >/dev/null 2>&1 || die "$CUT: not a git directory of CUTLASS"
fa_rev=$(git -C "$FA" rev-parse "$FA_COMMIT^{commit}") || die "$FA: no commit $FA_COMMIT"
pinned=$(git -C "$FA" ls-tree "$fa_rev" csrc/cutlass | awk '$2 == "commit" {print $3}')
[ -n "$pinned" ] || die "$FA@$fa_rev: csrc/cutlass is not a submodule entry"
if git -C "$CUT" cat-file -e "$pinned^{commit}" 2>/dev/null; then
  cut_rev=$pinned cut_note="the commit csrc/cutlass pins"
else
  cut_rev=$(git -C "$CUT" rev-parse HEAD)
  cut_note="the pinned commit $pinned is not in $CUT: its newest commit instead"
fi

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/fa3/csrc/cutlass"
# hopper/ without the instantiation files, then the ones the restricted build compiles
# (the mirrors lack some large blobs elsewhere in the trees, e.g. PDFs and images: git archive reports
# them as invalid objects and still writes every file of the paths asked for, checked below)
quiet() { grep -v 'error: invalid object' >&2 || true; }
git -C "$FA" archive "$fa_rev" README.md hopper ':(exclude)hopper/instantiations' 2> >(quiet) | tar -x -C "$work/fa3"
for f in hopper/setup.py hopper/flash_api_stable.cpp hopper/flash_fwd_launch_template.h README.md; do
  [ -f "$work/fa3/$f" ] || die "$FA@$fa_rev: $f missing from the archive"
done
mkdir -p "$work/fa3/hopper/instantiations"
for f in "${NEEDED[@]}"; do
  git -C "$FA" cat-file -e "$fa_rev:$f" 2>/dev/null || die "$FA@$fa_rev has no $f (the restricted build needs it)"
  [[ $f == hopper/instantiations/* ]] && git -C "$FA" show "$fa_rev:$f" > "$work/fa3/$f"
done
git -C "$CUT" archive "$cut_rev" include 2> >(quiet) | tar -x -C "$work/fa3/csrc/cutlass"
[ -f "$work/fa3/csrc/cutlass/include/cute/tensor.hpp" ] || die "$CUT@$cut_rev: no include/cute/tensor.hpp"

mkdir -p "$DEST"
tar -C "$work" -cf - fa3 | xz -T2 -6 > "$DEST/fa3src.tar.xz.tmp"
mv "$DEST/fa3src.tar.xz.tmp" "$DEST/fa3src.tar.xz"
size=$(stat -c %s "$DEST/fa3src.tar.xz")
[ "$size" -le "$MAX_PACK_BYTES" ] || die "$DEST/fa3src.tar.xz is $size bytes, over $MAX_PACK_BYTES"
files=$(cd "$work" && find fa3 -type f | wc -l)
unpacked=$(du -sb "$work/fa3" | cut -f1)
cat > "$DEST/manifest.json" <<EOF
{"flash_attention": {"git_dir": "$FA", "commit": "$fa_rev"},
 "cutlass": {"git_dir": "$CUT", "commit": "$cut_rev", "pinned": "$pinned", "note": "$cut_note"},
 "instantiations": [$(printf '"%s",' "${NEEDED[@]:5}" | sed 's/,$//')],
 "files": $files, "unpacked_bytes": $unpacked, "packed_bytes": $size,
 "meta": {"command_line": ["scripts/prepare_fa3_sources.sh"], "hostname": "$(hostname)",
          "date_utc": "$(date -u +%Y-%m-%dT%H:%M:%SZ)", "git": {"commit": "$(git rev-parse HEAD 2>/dev/null || echo unknown)"}}}
EOF
echo "prepare_fa3_sources.sh: $DEST/fa3src.tar.xz ($size bytes; $files files, $unpacked bytes unpacked):" \
     "flash-attention $fa_rev, CUTLASS $cut_rev ($cut_note)" >&2
