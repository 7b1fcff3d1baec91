#!/usr/bin/env bash
# The C API's CI (issue 24 section 1), on a Debian machine without a GPU (lavapipe):
#   bash capi/ci.sh
# 1. installs what it needs (Debian: cmake, g++, pkg-config, libvulkan-dev; scripts/setup.sh:
#    lavapipe and ONNX Runtime's CPU build; PyPI: numpy and Pillow for the reference check,
#    into target/capi-ci/python);
# 2. builds the C API (cargo build --release -p neural-frame-c) and installs it into a
#    temporary prefix (capi/install.sh);
# 3. checks that the installed header compiles alone as C11 and as C++17 with
#    -Wall -Wextra -Werror -pedantic;
# 4. links a C program through pkg-config, and through both CMake targets
#    (neural_frame::neural_frame, neural_frame::neural_frame_static), and runs them;
# 5. builds capi/examples/renderer.cpp with CMake against the installed package
#    (find_package(neural_frame)), runs it on lavapipe (CPU backend, the renderer's own
#    Vulkan device) with models/test/tiny-x2-f32.onnx on models/coffee.png, and checks its
#    output against ONNX Runtime's own CPU run (PSNR >= 48 dB, capi/tests/reference_psnr.py)
#    and against nf_context_infer_rgba8 byte for byte (--compare); that the check fails on
#    a picture that differs; and that a run under the Khronos validation layer reports no
#    error and writes the same picture.
# Any failure stops it with a non-zero exit and says what failed.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
say() { echo "capi-ci: $*" >&2; }

# 1. What it needs.
sudo_cmd=""
[ "$(id -u)" != 0 ] && command -v sudo >/dev/null 2>&1 && sudo_cmd="sudo"
need=()
command -v cmake >/dev/null 2>&1 || need+=(cmake)
command -v cc >/dev/null 2>&1 || need+=(gcc)
command -v c++ >/dev/null 2>&1 || need+=(g++)
command -v pkg-config >/dev/null 2>&1 || need+=(pkg-config)
[ -f /usr/include/vulkan/vulkan.h ] || need+=(libvulkan-dev)
if [ "${#need[@]}" -gt 0 ]; then
  if command -v apt-get >/dev/null 2>&1; then
    say "installing ${need[*]} (Debian packages)"
    $sudo_cmd apt-get update -qq >/dev/null
    DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
  else
    say "please install ${need[*]} (no apt-get here)"
    exit 1
  fi
fi
scripts/setup.sh --cpu
eval "$(scripts/runtime-env.sh)"
ort_dir="$root/.runtime/ort-cpu"
[ -d "$ort_dir/onnxruntime" ] || { say "no ONNX Runtime in $ort_dir (scripts/setup.sh --cpu puts it there)"; exit 1; }
python_dir="$root/target/capi-ci/python"
if ! PYTHONPATH="$python_dir" python3 -c 'import numpy, PIL' >/dev/null 2>&1; then
  say "installing numpy and Pillow from PyPI into ${python_dir#"$root"/} (for the reference check)"
  python3 -m pip install -q --disable-pip-version-check --root-user-action=ignore --only-binary=:all: \
    --target "$python_dir" "numpy==2.4.6" "pillow==13.0.0" >&2
fi
export PYTHONPATH="$python_dir:$ort_dir${PYTHONPATH:+:$PYTHONPATH}"
python3 -c 'import numpy, PIL, onnxruntime' || { say "numpy, Pillow or onnxruntime does not import"; exit 1; }

# 2. Build and install.
cargo build --release -p neural-frame-c
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
prefix="$work/prefix"
capi/install.sh "$prefix"

# 3. The installed header alone, as C11 and as C++17.
printf '#include <neural_frame.h>\nint main(void) { return NF_STATUS_OK; }\n' >"$work/alone.c"
cp "$work/alone.c" "$work/alone.cpp"
cc -std=c11 -Wall -Wextra -Werror -pedantic -fsyntax-only -I"$prefix/include" "$work/alone.c"
c++ -std=c++17 -Wall -Wextra -Werror -pedantic -fsyntax-only -I"$prefix/include" "$work/alone.cpp"
say "the header compiles alone as C11 and C++17 with -Wall -Wextra -Werror -pedantic"

# 4. Linking: pkg-config, and both CMake targets.
version="$(sed -n 's/^version = "\(.*\)"$/\1/p' capi/Cargo.toml | head -n 1)"
cat >"$work/version.c" <<'EOF'
#include <stdio.h>
#include <string.h>
#include <neural_frame.h>
int main(void) {
  nf_builder *b = NULL;
  if (nf_builder_new(NULL, &b) != NF_STATUS_INVALID_ARGUMENT || strstr(nf_last_error_message(), "model_path") == NULL)
    return 1;
  printf("%s\n", nf_version());
  return 0;
}
EOF
pc_flags="$(PKG_CONFIG_PATH="$prefix/lib/pkgconfig" pkg-config --cflags --libs neural_frame)"
# shellcheck disable=SC2086 # the flags are words
cc -std=c11 -Wall -Wextra -Werror "$work/version.c" $pc_flags -o "$work/version-pc"
[ "$(LD_LIBRARY_PATH="$prefix/lib" "$work/version-pc")" = "$version" ] || { say "the pkg-config build does not run"; exit 1; }
mkdir -p "$work/link"
cat >"$work/link/CMakeLists.txt" <<EOF
cmake_minimum_required(VERSION 3.16)
project(link C)
find_package(neural_frame $version EXACT REQUIRED CONFIG)
add_executable(version_shared "$work/version.c")
target_link_libraries(version_shared PRIVATE neural_frame::neural_frame)
add_executable(version_static "$work/version.c")
target_link_libraries(version_static PRIVATE neural_frame::neural_frame_static)
EOF
cmake -S "$work/link" -B "$work/link/build" -DCMAKE_PREFIX_PATH="$prefix" >/dev/null
cmake --build "$work/link/build" >/dev/null
for exe in version_shared version_static; do
  [ "$("$work/link/build/$exe")" = "$version" ] || { say "$exe does not run"; exit 1; }
done
if ldd "$work/link/build/version_static" | grep -q neural_frame; then
  say "version_static links libneural_frame_c.so"
  exit 1
fi
say "linked through pkg-config and CMake (shared and static): each prints version $version"

# 5. The C++ example, built against the installed package, on lavapipe.
cmake -S capi/examples -B "$work/example" -DCMAKE_PREFIX_PATH="$prefix" -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$work/example"
model=models/test/tiny-x2-f32.onnx
picture=models/coffee.png
out="$work/renderer.png"
"$work/example/renderer" --model "$model" --input "$picture" \
  --output "$out" --backend cpu --frames 3 --compare | tee "$work/renderer.log"
grep -q "context: cpu backend" "$work/renderer.log" || { say "the example did not run on the CPU backend"; exit 1; }
grep -q "byte for byte: yes" "$work/renderer.log" || { say "the example differs from nf_context_infer_rgba8"; exit 1; }
python3 capi/tests/reference_psnr.py "$model" "$picture" "$out" --min-db 48
# The check itself: a picture off by a few levels in one corner must fail it.
python3 - "$out" "$work/off.png" <<'EOF'
import sys
import numpy as np
from PIL import Image
px = np.asarray(Image.open(sys.argv[1]).convert("RGBA")).copy()
px[:200, :200, :3] ^= 0x10
Image.fromarray(px).save(sys.argv[2])
EOF
if python3 capi/tests/reference_psnr.py "$model" "$picture" "$work/off.png" --min-db 48 >"$work/off.log" 2>&1; then
  cat "$work/off.log" >&2
  say "the reference check passed a picture that differs"
  exit 1
fi
say "the reference check refuses a picture off by 16 levels in one corner: $(grep -o 'PSNR [0-9.]* dB' "$work/off.log" | head -n 1)"
# The renderer's and the context's Vulkan use on its device, under the Khronos validation layer.
if [ -f /usr/share/vulkan/explicit_layer.d/VkLayer_khronos_validation.json ]; then
  VK_INSTANCE_LAYERS=VK_LAYER_KHRONOS_validation "$work/example/renderer" --model "$model" --input "$picture" \
    --output "$work/validated.png" --backend cpu --frames 2 >"$work/validated.log" 2>&1 || {
    cat "$work/validated.log" >&2
    say "the example failed under the validation layer"
    exit 1
  }
  if grep -q "Validation Error" "$work/validated.log"; then
    grep "Validation Error" "$work/validated.log" >&2
    say "the validation layer reports errors"
    exit 1
  fi
  cmp -s "$out" "$work/validated.png" || { say "the validated run wrote another picture"; exit 1; }
  say "no validation errors, the same picture under the validation layer"
else
  say "the Khronos validation layer is not installed: the validated run is left out"
fi
say "ok: the C++ example's output matches ONNX Runtime's CPU run (PSNR >= 48 dB) and nf_context_infer_rgba8"
