#!/usr/bin/env bash
# Installs the C API, built beforehand, into a prefix:
#   cargo build --release -p neural-frame-c
#   capi/install.sh PREFIX [BUILD_DIR]
# BUILD_DIR is where cargo put libneural_frame_c.so and .a (default:
# ${CARGO_TARGET_DIR:-target}/release under the repository). It writes
#   PREFIX/include/neural_frame.h
#   PREFIX/lib/libneural_frame_c.so, PREFIX/lib/libneural_frame_c.a
#   PREFIX/lib/cmake/neural_frame/neural_frameConfig.cmake (+ neural_frameConfigVersion.cmake)
#   PREFIX/lib/pkgconfig/neural_frame.pc
# so that CMake's find_package(neural_frame) gives the imported targets
# neural_frame::neural_frame (shared) and neural_frame::neural_frame_static, and
# `pkg-config --cflags --libs neural_frame` the flags. The CMake package is relocatable (it
# finds the prefix from its own path); the .pc file names PREFIX. Linux only for now.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
usage() { sed -n '2,15p' "$0" | sed 's/^# \{0,1\}//'; }
case "${1:-}" in -h | --help) usage; exit 0 ;; esac
if [ $# -lt 1 ] || [ $# -gt 2 ]; then usage >&2; exit 2; fi
prefix="$1"
target="${CARGO_TARGET_DIR:-target}"
case "$target" in /*) ;; *) target="$root/$target" ;; esac
build="${2:-$target/release}"
for f in libneural_frame_c.so libneural_frame_c.a; do
  if [ ! -f "$build/$f" ]; then
    echo "install: $build/$f is missing: run \`cargo build --release -p neural-frame-c\` first" >&2
    exit 1
  fi
done
version="$(sed -n 's/^version = "\(.*\)"$/\1/p' "$root/capi/Cargo.toml" | head -n 1)"
[ -n "$version" ] || { echo "install: no version in capi/Cargo.toml" >&2; exit 1; }
major="${version%%.*}"
rest="${version#*.}"
minor="${rest%%.*}"
# What the static library needs from the system besides itself (`rustc --print
# native-static-libs` on Linux: the standard library's, and dlopen for Vulkan and ONNX Runtime).
static_libs="gcc_s util rt pthread m dl c"

mkdir -p "$prefix"
prefix="$(cd "$prefix" && pwd)"
install -d "$prefix/include" "$prefix/lib/cmake/neural_frame" "$prefix/lib/pkgconfig"
install -m 644 "$root/capi/include/neural_frame.h" "$prefix/include/neural_frame.h"
install -m 755 "$build/libneural_frame_c.so" "$prefix/lib/libneural_frame_c.so"
install -m 644 "$build/libneural_frame_c.a" "$prefix/lib/libneural_frame_c.a"

cmake_libs="$(echo "$static_libs" | tr ' ' ';')"
cat >"$prefix/lib/cmake/neural_frame/neural_frameConfig.cmake" <<EOF
# neural-frame's C API $version (written by capi/install.sh). Targets:
#   neural_frame::neural_frame         libneural_frame_c.so
#   neural_frame::neural_frame_static  libneural_frame_c.a and the system libraries it needs
# Both carry the include directory of neural_frame.h.
get_filename_component(_neural_frame_prefix "\${CMAKE_CURRENT_LIST_DIR}/../../.." ABSOLUTE)
set(neural_frame_VERSION "$version")
set(neural_frame_INCLUDE_DIRS "\${_neural_frame_prefix}/include")
if(NOT TARGET neural_frame::neural_frame)
  add_library(neural_frame::neural_frame SHARED IMPORTED)
  set_target_properties(neural_frame::neural_frame PROPERTIES
    IMPORTED_LOCATION "\${_neural_frame_prefix}/lib/libneural_frame_c.so"
    # The library has no SONAME: linked as -lneural_frame_c, found at run time through the
    # executable's RPATH (CMake's build tree sets it) or LD_LIBRARY_PATH.
    IMPORTED_NO_SONAME TRUE
    INTERFACE_INCLUDE_DIRECTORIES "\${_neural_frame_prefix}/include")
endif()
if(NOT TARGET neural_frame::neural_frame_static)
  add_library(neural_frame::neural_frame_static STATIC IMPORTED)
  set_target_properties(neural_frame::neural_frame_static PROPERTIES
    IMPORTED_LOCATION "\${_neural_frame_prefix}/lib/libneural_frame_c.a"
    IMPORTED_LINK_INTERFACE_LANGUAGES "C"
    INTERFACE_LINK_LIBRARIES "$cmake_libs"
    INTERFACE_INCLUDE_DIRECTORIES "\${_neural_frame_prefix}/include")
endif()
set(neural_frame_LIBRARIES neural_frame::neural_frame)
unset(_neural_frame_prefix)
EOF

cat >"$prefix/lib/cmake/neural_frame/neural_frameConfigVersion.cmake" <<EOF
# find_package(neural_frame X.Y) accepts $version where X.Y.Z asks for the same major and,
# before 1.0, the same minor version, not newer than this one (written by capi/install.sh).
set(PACKAGE_VERSION "$version")
if(PACKAGE_FIND_VERSION_RANGE)
  if(PACKAGE_VERSION VERSION_LESS PACKAGE_FIND_VERSION_MIN OR
     (PACKAGE_FIND_VERSION_RANGE_MAX STREQUAL "INCLUDE" AND PACKAGE_VERSION VERSION_GREATER PACKAGE_FIND_VERSION_MAX) OR
     (PACKAGE_FIND_VERSION_RANGE_MAX STREQUAL "EXCLUDE" AND PACKAGE_VERSION VERSION_GREATER_EQUAL PACKAGE_FIND_VERSION_MAX))
    set(PACKAGE_VERSION_COMPATIBLE FALSE)
  else()
    set(PACKAGE_VERSION_COMPATIBLE TRUE)
  endif()
elseif(PACKAGE_VERSION VERSION_LESS PACKAGE_FIND_VERSION)
  set(PACKAGE_VERSION_COMPATIBLE FALSE)
elseif(NOT "\${PACKAGE_FIND_VERSION_MAJOR}" STREQUAL "$major")
  set(PACKAGE_VERSION_COMPATIBLE FALSE)
elseif("$major" STREQUAL "0" AND NOT "\${PACKAGE_FIND_VERSION_MINOR}" STREQUAL "$minor" AND
       NOT "\${PACKAGE_FIND_VERSION_MINOR}" STREQUAL "")
  set(PACKAGE_VERSION_COMPATIBLE FALSE)
else()
  set(PACKAGE_VERSION_COMPATIBLE TRUE)
  if(PACKAGE_FIND_VERSION STREQUAL PACKAGE_VERSION)
    set(PACKAGE_VERSION_EXACT TRUE)
  endif()
endif()
if(NOT CMAKE_SIZEOF_VOID_P STREQUAL "" AND NOT CMAKE_SIZEOF_VOID_P STREQUAL "8")
  set(PACKAGE_VERSION "\${PACKAGE_VERSION} (64-bit)")
  set(PACKAGE_VERSION_UNSUITABLE TRUE)
endif()
EOF

libs_private="$(for l in $static_libs; do [ "$l" = c ] || printf -- '-l%s ' "$l"; done)"
cat >"$prefix/lib/pkgconfig/neural_frame.pc" <<EOF
prefix=$prefix
libdir=\${prefix}/lib
includedir=\${prefix}/include

Name: neural_frame
Description: neural-frame's C API: zero-copy neural inference on Vulkan frames
Version: $version
Libs: -L\${libdir} -lneural_frame_c
Libs.private: ${libs_private% }
Cflags: -I\${includedir}
EOF
echo "install: neural-frame C API $version into $prefix" >&2
