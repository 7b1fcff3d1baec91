#!/usr/bin/env bash
# Packs ONNX Runtime's Python package (onnxruntime-gpu 1.31.1, CPython 3.12,
# Linux x86-64) for the GPU machine, which has Python 3.12, torch and numpy but
# no network, for bench/kernel_profile.py. The wheel is 250 MiB, almost all of
# it the CUDA provider library, which the gpu-kit (../shared/gpu-kit/pack.sh)
# already brings; so this packs the `onnxruntime/` package and its dist-info
# without:
#   - libonnxruntime_providers_cuda.so and libonnxruntime_providers_shared.so
#     (unpack.sh links them from the kit's ort/lib, the same files of the same
#     wheel: their sha256 is checked there);
#   - libonnxruntime_providers_tensorrt.so (no TensorRT there);
#   - libonnxruntime.so.1.31.1 (the C API library: the Python extension
#     onnxruntime_pybind11_state has the runtime linked in and does not load it).
# The rest (the extension, about 30 MiB, and the Python files) goes into one
# zstd-compressed tar.
# Usage: pack_ort_python.sh DEST        (e.g. .gpu-kit/py)
# Layout of DEST: ort-py.tar.zst, ort-py.sha256, providers.sha256, unpack.sh.
# On the GPU machine, after the kit's stash.sh (which brings zstd):
#   eval "$(bash DEST/unpack.sh)"      # unpacks into $ORTPY_HOME (default /var/tmp/ortpy),
#                                      # links the providers from $KIT_HOME/ort/lib (default
#                                      # /var/tmp/gpu-kit), prints `export PYTHONPATH=...`
set -euo pipefail
[ $# -eq 1 ] || { echo "usage: $0 DEST" >&2; exit 2; }
dest="$(realpath -m "$1")"
ort_version=1.31.1
cache="${XDG_CACHE_HOME:-$HOME/.cache}/gpu-kit"
tarball="$cache/onnxruntime-py-$ort_version-cp312.tar.zst"
sums="$cache/onnxruntime-py-$ort_version-providers.sha256"
mkdir -p "$cache" "$dest"

if [ ! -s "$tarball" ] || [ ! -s "$sums" ]; then
  work="$(mktemp -d)"
  trap 'rm -rf "$work"' EXIT
  python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 \
    --implementation cp --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 \
    -d "$work" "onnxruntime-gpu==$ort_version"
  whl="$(ls "$work"/onnxruntime_gpu-"$ort_version"-cp312-*.whl)"
  mkdir -p "$work/pkg" "$work/libs"
  (cd "$work/pkg" && unzip -q "$whl" 'onnxruntime/*' "onnxruntime_gpu-$ort_version.dist-info/*" \
     -x 'onnxruntime/capi/libonnxruntime_providers_*.so' "onnxruntime/capi/libonnxruntime.so*")
  (cd "$work/libs" && unzip -q -j "$whl" 'onnxruntime/capi/libonnxruntime_providers_cuda.so' \
     'onnxruntime/capi/libonnxruntime_providers_shared.so' && sha256sum libonnxruntime_providers_*.so) \
     > "$sums.tmp"
  ext="$(ls "$work"/pkg/onnxruntime/capi/onnxruntime_pybind11_state.cpython-312-x86_64-linux-gnu.so)"
  if readelf -d "$ext" 2>/dev/null | grep -q 'NEEDED.*libonnxruntime\.so'; then
    echo "pack_ort_python.sh: $ext needs libonnxruntime.so; this script assumes it does not" >&2; exit 1
  fi
  echo "compressing the onnxruntime package (about a minute)..." >&2
  tar -C "$work/pkg" --owner=0 --group=0 -cf - onnxruntime "onnxruntime_gpu-$ort_version.dist-info" \
    | zstd -19 -T0 -q -o "$tarball.tmp"
  mv "$tarball.tmp" "$tarball"
  mv "$sums.tmp" "$sums"
fi

rm -f "$dest/ort-py.tar.zst" "$dest/ort-py.sha256" "$dest/providers.sha256" "$dest/unpack.sh"
cp "$tarball" "$dest/ort-py.tar.zst"
sha256sum "$tarball" | cut -d' ' -f1 > "$dest/ort-py.sha256"
cp "$sums" "$dest/providers.sha256"
cat > "$dest/unpack.sh" <<'UNPACK'
#!/usr/bin/env bash
# Made by bench/pack_ort_python.sh. On the GPU machine, after the gpu-kit's
# stash.sh: unpacks ONNX Runtime's Python package into $ORTPY_HOME (default
# /var/tmp/ortpy), links the CUDA provider libraries into its capi/ from
# $KIT_HOME/ort/lib (default /var/tmp/gpu-kit/ort/lib), checking they are the
# ones this package was cut from, and prints the line to evaluate:
#   eval "$(bash unpack.sh)"     # sets PYTHONPATH
# Messages go to stderr; only the export line goes to stdout. Safe to run again.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
home="${ORTPY_HOME:-/var/tmp/ortpy}"
kit="${KIT_HOME:-/var/tmp/gpu-kit}/ort/lib"
want="$(cat "$here/ort-py.sha256")"
if [ "$(cat "$home/.packed-sha256" 2>/dev/null)" != "$want" ]; then
  [ "$(sha256sum "$here/ort-py.tar.zst" | cut -d' ' -f1)" = "$want" ] || {
    echo "ortpy: ort-py.tar.zst does not match ort-py.sha256" >&2; exit 1; }
  command -v zstd >/dev/null || { echo "ortpy: no zstd; run the gpu-kit's base/stash.sh first" >&2; exit 1; }
  rm -rf "$home/onnxruntime" "$home"/onnxruntime_gpu-*.dist-info
  mkdir -p "$home"
  zstd -d -q -c "$here/ort-py.tar.zst" | tar -C "$home" -xf -
  echo "$want" > "$home/.packed-sha256"
  echo "ortpy: unpacked into $home" >&2
fi
capi="$home/onnxruntime/capi"
while read -r sum lib; do
  [ -e "$kit/$lib" ] || { echo "ortpy: $kit/$lib is missing (KIT_HOME=${KIT_HOME:-/var/tmp/gpu-kit}); unpack the gpu-kit first" >&2; exit 1; }
  if [ "${ORTPY_SKIP_CHECK:-0}" != 1 ] && [ "$(sha256sum "$kit/$lib" | cut -d' ' -f1)" != "$sum" ]; then
    echo "ortpy: $kit/$lib is not the one of this package (sha256 differs; ORTPY_SKIP_CHECK=1 links it anyway)" >&2; exit 1
  fi
  ln -sfn "$kit/$lib" "$capi/$lib"
done < "$here/providers.sha256"
echo "ortpy: $capi links the providers in $kit" >&2
python3 -c 'import sys; sys.exit(sys.version_info[:2] != (3, 12))' 2>/dev/null ||
  echo "ortpy: warning: python3 here is not 3.12; this package is for CPython 3.12" >&2
echo "export PYTHONPATH=$home\${PYTHONPATH:+:\$PYTHONPATH}"
UNPACK
chmod +x "$dest/unpack.sh"
echo "packed in $dest ($(du -sh "$dest" | cut -f1) in all; ort-py.tar.zst $(du -h "$dest/ort-py.tar.zst" | cut -f1))"
