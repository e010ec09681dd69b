#!/usr/bin/env bash
# Links libibverbs.so.1 (and libibverbs.so) from this package's staticlib,
# with rdma-core's symbol versions (libibverbs.map).
#
#   soft-verbs/link.sh [debug|release] [OUT_DIR]
#
# builds the package in that profile (default release) and writes the
# library to OUT_DIR (default target/soft-verbs/PROFILE). Then run any verbs
# program with LD_LIBRARY_PATH=OUT_DIR (see docs/soft-verbs.md).
#
# With SOFT_VERBS_NO_BUILD=1 it only links the archive cargo already built
# (tests do this: cargo holds its build lock while they run), or the one
# SOFT_VERBS_ARCHIVE names (tests name the one built with their own rlib).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(dirname "$here")"
profile="${1:-release}"
target_dir="${CARGO_TARGET_DIR:-$root/target}"
out="${2:-$target_dir/soft-verbs/$profile}"
case "${SOFT_VERBS_NO_BUILD:-0}:$profile" in
    1:debug | 1:release) ;;
    0:release) cargo build --quiet --release -p hipobj-soft-verbs --manifest-path "$root/Cargo.toml" ;;
    0:debug) cargo build --quiet -p hipobj-soft-verbs --manifest-path "$root/Cargo.toml" ;;
    *) echo "link.sh: profile is debug or release, not $profile" >&2; exit 2 ;;
esac
archive="${SOFT_VERBS_ARCHIVE:-$target_dir/$profile/libhipobj_soft_verbs.a}"
mkdir -p "$out"
tmp="$out/.libibverbs.so.1.$$"
trap 'rm -f "$tmp"' EXIT
"${CC:-cc}" -shared -o "$tmp" \
    -Wl,-soname,libibverbs.so.1 \
    -Wl,--version-script="$here/libibverbs.map" \
    -Wl,-z,now -Wl,-z,relro -Wl,--no-undefined \
    -Wl,--whole-archive "$archive" -Wl,--no-whole-archive \
    -lpthread -ldl -lm -lrt -lgcc_s -lc
mv -f "$tmp" "$out/libibverbs.so.1"
ln -sf libibverbs.so.1 "$out/libibverbs.so"
echo "$out/libibverbs.so.1"
