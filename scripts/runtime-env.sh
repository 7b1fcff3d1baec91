#!/usr/bin/env bash
# Prints the environment that lets ONNX Runtime's CUDA provider find the CUDA
# 13 / cuDNN 9 libraries scripts/setup.sh installed from PyPI into
# .runtime/cuda13 (and the CUDA toolkit's, where one is installed):
#   eval "$(scripts/runtime-env.sh)"
# scripts/neural-frame and scripts/test do this themselves.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
dirs=()
if [ -d "$root/.runtime/cuda13" ]; then
  while IFS= read -r d; do dirs+=("$d"); done < <(find "$root/.runtime/cuda13" -name 'lib*.so*' -printf '%h\n' | sort -u)
fi
for d in /usr/local/cuda/lib64 /usr/local/cuda/targets/x86_64-linux/lib; do
  [ -d "$d" ] && dirs+=("$d")
done
path="$(IFS=:; echo "${dirs[*]:-}")"
if [ -n "$path" ]; then
  printf 'export LD_LIBRARY_PATH=%q\n' "$path${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
fi
