#!/usr/bin/env bash
# The device tool carries at most 64 MiB a call, this repository's tracked files included
# (about 21 MB now), so the gpu-kit's four 48 MiB parts no longer fit beside them. This splits
# the kit's ONNX Runtime (.gpu-kit/p1..p4, from ../shared/gpu-kit/pack.sh) into five parts of
# about 39 MB (base/parts says 5; stash.sh checks the sha256 of the whole), and .gpu-bin
# (bench/gpu-build.sh) into two halves, .gpu-bin-a and .gpu-bin-b. Safe to run again.
#
#   echo /.gpu-bin-a/ >>.git/info/exclude; echo /.gpu-bin-b/ >>.git/info/exclude
#   bash bench/gpu-split.sh
#
# Then, back to back on one machine (it goes back after 30 s idle):
#   carry [".gpu-kit/pK"], K = 1..5:
#       mkdir -p /var/tmp/gpu-kit/parts && cp -f .gpu-kit/pK/part-* /var/tmp/gpu-kit/parts/
#   carry [".gpu-kit/base", ".gpu-bin-a"]:
#       mkdir -p /var/tmp/nfbin && cp -a .gpu-bin-a/. /var/tmp/nfbin/ && bash .gpu-kit/base/stash.sh
#   carry [".gpu-kit/base", ".gpu-bin-b"]:
#       cp -a .gpu-bin-b/. /var/tmp/nfbin/ && rm -rf .gpu-bin && ln -s /var/tmp/nfbin .gpu-bin && bash bench/gpu-run.sh …
#   later calls carry [".gpu-kit/base"] and begin with
#       rm -rf .gpu-bin && ln -s /var/tmp/nfbin .gpu-bin &&
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
kit=.gpu-kit
if [ "$(cat "$kit/base/parts")" != 5 ]; then
  tmp=$(mktemp -d)
  cat "$kit"/p[0-9]*/part-* >"$tmp/all"
  [ "$(sha256sum "$tmp/all" | cut -d' ' -f1)" = "$(cat "$kit/base/ort.sha256")" ] ||
    { echo "gpu-split: the parts do not make the kit's ONNX Runtime" >&2; exit 1; }
  (cd "$tmp" && split -n 5 -d -a 1 all part- && rm all)
  rm -rf "$kit"/p[0-9]*
  for i in 0 1 2 3 4; do mkdir -p "$kit/p$((i + 1))" && mv "$tmp/part-$i" "$kit/p$((i + 1))/"; done
  rmdir "$tmp"
  chmod u+w "$kit/base/parts" && echo 5 >"$kit/base/parts"
fi
rm -rf .gpu-bin-a .gpu-bin-b
mkdir .gpu-bin-a .gpu-bin-b
ls -S .gpu-bin | awk 'NR % 2 == 1' | while read -r f; do cp -a ".gpu-bin/$f" .gpu-bin-a/; done
ls -S .gpu-bin | awk 'NR % 2 == 0' | while read -r f; do cp -a ".gpu-bin/$f" .gpu-bin-b/; done
du -sh "$kit"/p[0-9]* .gpu-bin-a .gpu-bin-b
