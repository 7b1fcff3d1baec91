#!/usr/bin/env bash
# Installs what neural-frame needs to run and test on this machine, once:
#  - a Vulkan loader and, where no Vulkan driver is installed, Mesa's software
#    driver (lavapipe), plus the Khronos validation layer for the tests;
#  - ONNX Runtime 1.31.1 from PyPI into .runtime/: the CPU build, or, where an
#    NVIDIA driver is present, onnxruntime-gpu and the CUDA 13 / cuDNN 9
#    runtime wheels its CUDA provider loads (each skipped where the system
#    already has that library: the script says which it found).
# Safe to run again; prints what it does on stderr.
#
#   scripts/setup.sh [--dry-run] [--gpu|--cpu]
#     --dry-run   print the PyPI packages it would install, one `name==version`
#                 a line on stdout, and install nothing
#     --gpu/--cpu set up for that kind of machine (default: an NVIDIA driver → GPU)
#
# The CUDA wheels' libraries are found through LD_LIBRARY_PATH: the scripts
# (scripts/neural-frame, scripts/test) set it; elsewhere,
#   eval "$(scripts/runtime-env.sh)"
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
ort_version=1.31.1
say() { echo "setup: $*" >&2; }

dry_run=0
kind=""
for arg in "$@"; do
  case "$arg" in
    --dry-run) dry_run=1 ;;
    --gpu) kind=gpu ;;
    --cpu) kind=cpu ;;
    -h | --help) sed -n '2,18p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "setup: unknown argument \`$arg\` (--dry-run, --gpu, --cpu)" >&2; exit 2 ;;
  esac
done
if [ -z "$kind" ]; then
  if [ -e /proc/driver/nvidia/version ] || command -v nvidia-smi >/dev/null 2>&1; then kind=gpu; else kind=cpu; fi
fi

# The CUDA provider of onnxruntime-gpu 1.31.1 is built for CUDA 13 and cuDNN 9 (its wheel's
# `cuda` and `cudnn` extras: nvidia-cuda-runtime~=13.0, nvidia-cuda-nvrtc~=13.0,
# nvidia-cufft~=12.0, nvidia-curand~=10.0, nvidia-cudnn-cu13~=9.0; cuBLAS 13 comes with cuDNN's
# requirements). Pinned to the CUDA 13.0 family, which the 580 drivers run.
# package==version  library it provides
cuda_wheels=(
  "nvidia-cuda-runtime==13.0.96 libcudart.so.13"
  "nvidia-cublas==13.1.0.3 libcublas.so.13"
  "nvidia-cufft==12.0.0.61 libcufft.so.12"
  "nvidia-curand==10.4.0.35 libcurand.so.10"
  "nvidia-cuda-nvrtc==13.0.88 libnvrtc.so.13"
  "nvidia-cudnn-cu13==9.13.1.26 libcudnn.so.9"
)

# ldconfig's cache, read once. Not `ldconfig -p | grep -q …`: under pipefail, grep's early
# exit can kill ldconfig with SIGPIPE mid-listing, and a library that is there would count
# as missing (and re-run apt-get). grep reads this variable through a here-string instead.
ldconfig_cache=""
read_ldconfig_cache() {
  if [ -z "$ldconfig_cache" ]; then ldconfig_cache="$(ldconfig -p 2>/dev/null || true)"; fi
}

# Where a library is on the system already: ldconfig's cache or the CUDA toolkit's directories.
system_has() {
  read_ldconfig_cache
  grep -q "[[:space:]]$1 " <<<"$ldconfig_cache" && return 0
  local d
  for d in /usr/local/cuda/lib64 /usr/local/cuda/targets/x86_64-linux/lib /usr/lib/x86_64-linux-gnu; do
    [ -e "$d/$1" ] && return 0
  done
  return 1
}

if [ "$kind" = gpu ]; then
  pkg=onnxruntime-gpu; dir="$root/.runtime/ort-gpu"
else
  pkg=onnxruntime; dir="$root/.runtime/ort-cpu"
fi

if [ "$dry_run" = 1 ]; then
  echo "$pkg==$ort_version"
  if [ "$kind" = gpu ]; then
    for w in "${cuda_wheels[@]}"; do echo "${w%% *}"; done
  fi
  exit 0
fi

sudo_cmd=""
if [ "$(id -u)" != 0 ]; then
  command -v sudo >/dev/null 2>&1 && sudo_cmd="sudo"
fi

need_pkgs=()
read_ldconfig_cache
grep -q 'libvulkan.so.1' <<<"$ldconfig_cache" || need_pkgs+=(libvulkan1)
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

pip_install() {
  local target=$1; shift
  python3 -m pip install -q --disable-pip-version-check --root-user-action=ignore --no-deps --target "$target" "$@" >&2
}

lib="$dir/onnxruntime/capi/libonnxruntime.so.$ort_version"
if [ ! -e "$lib" ] && [ -z "${ORT_DYLIB_PATH:-}" ]; then
  say "installing $pkg $ort_version from PyPI into ${dir#"$root"/}"
  pip_install "$dir" "$pkg==$ort_version"
fi

# A link where the library looks from any crate (outside this checkout too):
# ${XDG_DATA_HOME:-~/.local/share}/neural-frame/ort-gpu or ort-cpu.
if [ -z "${ORT_DYLIB_PATH:-}" ] && [ -n "${HOME:-}${XDG_DATA_HOME:-}" ]; then
  data="${XDG_DATA_HOME:-$HOME/.local/share}/neural-frame"
  link="$data/$(basename "$dir")"
  # Said once: not again while the link is there already.
  if [ "$(readlink "$link" 2>/dev/null)" != "$dir" ] && mkdir -p "$data" 2>/dev/null && ln -sfn "$dir" "$link" 2>/dev/null; then
    say "linked $link → ${dir#"$root"/} (found by crates outside this checkout)"
  fi
fi

# The CUDA wheels go in a directory of their own, installed as one set (pip's --target
# replaces a package directory such as nvidia/ rather than merging into it).
cuda_dir="$root/.runtime/cuda13"
if [ "$kind" = gpu ]; then
  wanted=()
  for w in "${cuda_wheels[@]}"; do
    spec="${w%% *}"; so="${w##* }"
    if system_has "$so"; then
      say "found $so on the system: not installing ${spec%%==*}"
    else
      wanted+=("$spec")
      [ -n "$(find "$cuda_dir" -name "$so*" -print -quit 2>/dev/null)" ] || missing=1
    fi
  done
  if [ "${missing:-0}" = 1 ]; then
    say "installing ${wanted[*]} from PyPI into ${cuda_dir#"$root"/} (the CUDA provider's libraries)"
    pip_install "$cuda_dir" --upgrade "${wanted[@]}"
  fi
fi
