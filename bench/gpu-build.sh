#!/usr/bin/env bash
# Builds what a GPU session runs (README, "Tests") into .gpu-bin/ of this checkout: the GPU
# test binaries, the library's unit-test binary (`neural_frame`), the examples, the CLI, the C
# API's library and its C++ example, and the upscaler's weights for bench/torch_side.py. The
# build runs in a clean worktree of HEAD (uncommitted changes are not in it), with a target
# directory of its own so that it does not disturb this checkout's. Then bench/gpu-run.sh runs
# them on the GPU machine.
#
#   bash bench/gpu-build.sh [worktree] [target-dir]     (defaults: ../gpu-build, ../target-gpu)
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
tree="${1:-$root/../gpu-build}"
export CARGO_TARGET_DIR="${2:-$root/../target-gpu}"
git -C "$root" worktree remove -f "$tree" 2>/dev/null || true
git -C "$root" worktree prune
git -C "$root" worktree add -f "$tree" HEAD --detach >/dev/null
cd "$tree"
cargo test --release --workspace --no-run
cargo build --release --workspace --bins --examples
cargo build --release -p neural-frame-c
B="$root/.gpu-bin"
T="$CARGO_TARGET_DIR/release"
rm -rf "$B"
mkdir -p "$B"
for t in gpu_interop gpu_pipeline gpu_ring gpu_foreign gpu_serve gpu_contract gpu_passes gpu_stream; do
  f=$(ls -t "$T"/deps/"$t"-* | grep -v '\.d$' | head -1)
  cp "$f" "$B/$t"
done
for f in "$T"/deps/neural_frame-*; do
  case $f in *.d | *.rlib | *.rmeta) continue ;; esac
  if "$f" --list 2>/dev/null | grep -q "tests,"; then cp "$f" "$B/neural_frame"; fi
done
cp "$T"/examples/{first_frames,foreign_renderer,render,upscale_file} "$T/neural-frame" "$T/libneural_frame_c.so" "$B/"
g++ -std=c++17 -O2 capi/examples/renderer.cpp -Icapi/include -L"$T" -lneural_frame_c -lvulkan \
  -Wl,-rpath,'$ORIGIN' -o "$B/renderer_cpp"
strip "$B"/*
# The weights for bench/torch_side.py, exported with onnx and onnxruntime from a virtualenv of
# the build's own (not the system's Python: an onnxruntime there is one the CLI would find).
venv="$CARGO_TARGET_DIR/export-venv"
if [ -x "$venv/bin/python" ] || { python3 -m venv "$venv" && "$venv/bin/pip" install -q onnx onnxruntime numpy; }; then
  "$venv/bin/python" bench/torch_side.py export models/upscale.onnx "$B/upscale-weights.npz"
else
  echo "no upscale-weights.npz: the export's virtualenv ($venv) could not be made" >&2
fi
du -sh "$B"
echo "built from $(git -C "$tree" rev-parse --short HEAD)"
