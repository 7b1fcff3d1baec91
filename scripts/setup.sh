#!/usr/bin/env bash
# Installs what neural-frame needs to run and test on this machine, once:
#  - a Vulkan loader and, where no Vulkan driver is installed, Mesa's software
#    driver (lavapipe), plus the Khronos validation layer for the tests;
#  - ONNX Runtime 1.31.1 from PyPI into .runtime/ (onnxruntime-gpu where an
#    NVIDIA driver is present, the CPU build otherwise).
# Safe to run again; prints what it does on stderr.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
ort_version=1.31.1
say() { echo "setup: $*" >&2; }

sudo_cmd=""
if [ "$(id -u)" != 0 ]; then
  command -v sudo >/dev/null 2>&1 && sudo_cmd="sudo"
fi

need_pkgs=()
ldconfig -p 2>/dev/null | grep -q 'libvulkan.so.1' || need_pkgs+=(libvulkan1)
icds="$(ls /usr/share/vulkan/icd.d/*.json /etc/vulkan/icd.d/*.json /usr/local/nvidia/share/vulkan/icd.d/*.json 2>/dev/null || true)"
[ -n "$icds" ] || need_pkgs+=(mesa-vulkan-drivers)
ls /usr/share/vulkan/explicit_layer.d/VkLayer_khronos_validation.json >/dev/null 2>&1 || need_pkgs+=(vulkan-validationlayers)
if [ "${#need_pkgs[@]}" -gt 0 ]; then
  if command -v apt-get >/dev/null 2>&1; then
    say "installing ${need_pkgs[*]} (Debian packages)"
    $sudo_cmd apt-get update -qq >/dev/null
    DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -qq "${need_pkgs[@]}" >/dev/null
  else
    say "please install: ${need_pkgs[*]} (no apt-get here)"
  fi
fi

if [ -e /proc/driver/nvidia/version ] || command -v nvidia-smi >/dev/null 2>&1; then
  pkg=onnxruntime-gpu; dir="$root/.runtime/ort-gpu"
else
  pkg=onnxruntime; dir="$root/.runtime/ort-cpu"
fi
lib="$dir/onnxruntime/capi/libonnxruntime.so.$ort_version"
if [ ! -e "$lib" ] && [ -z "${ORT_DYLIB_PATH:-}" ]; then
  say "installing $pkg $ort_version from PyPI into ${dir#"$root"/}"
  python3 -m pip install -q --disable-pip-version-check --root-user-action=ignore --no-deps --target "$dir" "$pkg==$ort_version" >&2
fi
