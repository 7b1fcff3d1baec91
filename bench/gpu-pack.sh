#!/usr/bin/env bash
# Packs a build of bench/gpu-build.sh into .gpu-bins/NAME.tar.xz: about 9.5 MB against the 57 MB
# of .gpu-bin, so that two or three builds (say, before and after a kernel change, or a default
# either way) travel in one call beside the kit's base instead of .gpu-bin's two halves of
# bench/gpu-split.sh (2026-12-06-h100-s14 carried three so). Once: echo /.gpu-bins/ >>.git/info/exclude
#
#   bash bench/gpu-pack.sh NAME [FOLDER]        (FOLDER: a .gpu-bin, by default this checkout's)
#
# Then, after the kit's five parts (bench/gpu-split.sh), carry [".gpu-kit/base", ".gpu-bins"]
# and begin the command with
#   for v in NAME ...; do mkdir -p /var/tmp/nfbin-$v && tar -C /var/tmp/nfbin-$v -xJf .gpu-bins/$v.tar.xz; done;
#   rm -rf .gpu-bin && ln -s /var/tmp/nfbin-NAME .gpu-bin && bash bench/gpu-run.sh …
# Later calls carry [".gpu-kit/base"] and re-point the link at the build they run.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
name=${1:?usage: bench/gpu-pack.sh NAME [FOLDER]}
from=${2:-.gpu-bin}
[ -x "$from/neural-frame" ] || { echo "gpu-pack: no build in $from (bash bench/gpu-build.sh)" >&2; exit 1; }
mkdir -p .gpu-bins
tar -C "$from" -cf - . | xz -6 -T2 >".gpu-bins/$name.tar.xz"
du -h ".gpu-bins/$name.tar.xz"
