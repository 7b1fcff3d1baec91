#!/usr/bin/env bash
# A VapourSynth R81 environment with GPU frames for the plugin's tests (vapoursynth/tests/host.rs),
# on a Debian 12 machine without a GPU. Nothing is installed system-wide: everything goes into DIR.
#
#   bash vapoursynth/ci-env.sh DIR     then     . DIR/env.sh
#
# - VapourSynth 81: the manylinux wheel from PyPI, unpacked (it is cp312-abi3, but
#   libvapoursynth.so.4 inside loads without libpython, so no Python 3.12 is needed); its
#   include/ has VapourSynth4.h, VSVulkan4.h and VSHelper4.h.
# - lavapipe from Mesa 25.0.7 in bookworm-backports (bookworm's Mesa 22.3.6 offers Vulkan 1.3
#   only, and R81's core asks for 1.4): the .debs unpacked with dpkg -x.
# - a Vulkan 1.4 loader built from Debian trixie's source package (bookworm has 1.3.239 and
#   trixie's binary needs glibc 2.38), with cmake and ninja from PyPI in a venv of python3.
#
# Each step is skipped when its result is already in DIR, so a second run does nothing heavy
# (it re-checks the environment: about a second). The first takes about a minute on 2 cores.
#
# DIR/env.sh exports only NF_VAPOURSYNTH_* variables, so sourcing it changes nothing for
# other programs (CI sources it for its whole run, where the system lavapipe serves the other
# tests):
#   NF_VAPOURSYNTH_LIB              libvapoursynth.so.4
#   NF_VAPOURSYNTH_INCLUDE          the directory with VapourSynth4.h, VSVulkan4.h, VSHelper4.h
#   NF_VAPOURSYNTH_VULKAN_INCLUDE   Vulkan 1.4 headers (VSVulkan4.h includes vulkan/vulkan_core.h)
#   NF_VAPOURSYNTH_LD_LIBRARY_PATH  what a process running the core puts first on LD_LIBRARY_PATH
#                                   (the 1.4 loader, then the backports' libdrm)
#   NF_VAPOURSYNTH_VK_DRIVER_FILES  what it sets VK_DRIVER_FILES to (the backports' lavapipe)
#   NF_VAPOURSYNTH_ENV              DIR/env.sh itself
# LD_LIBRARY_PATH is read once, when a process starts, so the tests start the core in a child
# process with the last two applied. DIR/vulkan-env.sh exports them as LD_LIBRARY_PATH and
# VK_DRIVER_FILES for a shell that only runs VapourSynth.
#
# Needs: apt-get, dpkg, python3 with pip and venv, a C compiler, xz, and the libraries the
# lavapipe links to from the system (libLLVM-15 and friends: Debian's mesa-vulkan-drivers, which
# scripts/setup.sh installs, brings them).
set -euo pipefail

[ $# -eq 1 ] || { echo "usage: bash $0 DIR" >&2; exit 2; }
D=$(realpath -m "$1")
mkdir -p "$D"
cd "$D"
say() { echo "vapoursynth-env: $*" >&2; }
die() { say "$*"; exit 1; }

VS_VERSION=81
# Mesa 25.0.7 exactly (any Debian revision of it); libdrm is whatever the backports have for it.
MESA_UPSTREAM=25.0.7
PY=${PYTHON:-python3}

# Private apt state for one source, in the array O: the system's lists and cache are not touched.
apt_opts() { # $1 = name, $2 = sources line
  mkdir -p "apt-$1/lists/partial" "apt-$1/cache/archives/partial"
  echo "$2" >"apt-$1/sources.list"
  O=(-o "Dir::Etc::SourceList=$D/apt-$1/sources.list" -o Dir::Etc::SourceParts=/dev/null
    -o "Dir::State::Lists=$D/apt-$1/lists" -o "Dir::Cache=$D/apt-$1/cache")
}

# 1. VapourSynth R81: the wheel, unpacked into DIR/vapoursynth.
VS_DIR="$D/vapoursynth/vapoursynth"
if [ ! -e vapoursynth/.done ]; then
  say "downloading the VapourSynth $VS_VERSION wheel from PyPI"
  rm -rf wheel vapoursynth
  "$PY" -m pip download --quiet --disable-pip-version-check --no-deps --python-version 3.12 \
    --platform manylinux_2_28_x86_64 --only-binary=:all: "vapoursynth==$VS_VERSION" -d wheel
  whl=$(ls wheel/vapoursynth-"$VS_VERSION"-*.whl)
  "$PY" -m zipfile -e "$whl" vapoursynth
  for f in libvapoursynth.so.4 include/VapourSynth4.h include/VSVulkan4.h include/VSHelper4.h; do
    [ -e "$VS_DIR/$f" ] || die "the wheel has no vapoursynth/$f"
  done
  touch vapoursynth/.done
fi

# 2. lavapipe from Mesa 25.0.7 (bookworm-backports), unpacked into DIR/mesa.
LIB="$D/mesa/usr/lib/x86_64-linux-gnu"
if [ ! -e mesa/.done ]; then
  say "downloading Mesa $MESA_UPSTREAM's lavapipe from bookworm-backports"
  rm -rf mesa debs
  apt_opts bpo 'deb http://deb.debian.org/debian bookworm-backports main'
  apt-get "${O[@]}" -qq update
  mesa=$(apt-cache "${O[@]}" madison mesa-vulkan-drivers | awk -v v="$MESA_UPSTREAM" \
    '$3 ~ "^(1:)?" v "-" && /bookworm-backports/ { print $3; exit }')
  [ -n "$mesa" ] || die "bookworm-backports has no mesa-vulkan-drivers $MESA_UPSTREAM (it has:" \
    "$(apt-cache "${O[@]}" madison mesa-vulkan-drivers | awk '{ print $3 }' | xargs))"
  mkdir -p debs
  (cd debs && apt-get "${O[@]}" -qq download "mesa-vulkan-drivers=$mesa" \
    libdrm2/bookworm-backports libdrm-amdgpu1/bookworm-backports)
  for f in debs/*.deb; do dpkg -x "$f" mesa; done
  [ -e "$LIB/libvulkan_lvp.so" ] || die "no libvulkan_lvp.so in mesa-vulkan-drivers $mesa"
  printf '{"file_format_version":"1.0.0","ICD":{"library_path":"%s","api_version":"1.4.305"}}\n' \
    "$LIB/libvulkan_lvp.so" >lvp.json
  touch mesa/.done
fi
missing=$(LD_LIBRARY_PATH="$LIB" ldd "$LIB/libvulkan_lvp.so" | awk '/not found/ { print $1 }' | xargs)
[ -z "$missing" ] || die "the lavapipe needs libraries this system lacks: $missing" \
  "(Debian's mesa-vulkan-drivers brings them: scripts/setup.sh installs it)"

# 3. A Vulkan 1.4 loader: trixie's source package (it bundles vulkan-headers), built into
#    DIR/loader with cmake and ninja from PyPI.
if [ ! -e loader/.done ]; then
  say "building the Vulkan 1.4 loader from trixie's source package (about 30 s)"
  rm -rf loader src build
  if [ ! -x tools/bin/cmake ] || [ ! -x tools/bin/ninja ]; then
    rm -rf tools
    "$PY" -m venv tools
    tools/bin/pip install --quiet --disable-pip-version-check cmake ninja
  fi
  apt_opts src 'deb-src http://deb.debian.org/debian trixie main'
  apt-get "${O[@]}" -qq update
  mkdir -p src
  (cd src && apt-get "${O[@]}" -qq source --download-only vulkan-loader && tar xf vulkan-loader_*.orig.tar.xz)
  S=$(ls -d "$D"/src/vulkan-loader-*/)
  case "$S" in */vulkan-loader-1.4.*) ;; *) die "trixie's vulkan-loader is not 1.4: $S" ;; esac
  export PATH="$D/tools/bin:$PATH"
  cmake -S "$S/vulkan-headers" -B build/headers -G Ninja -DCMAKE_INSTALL_PREFIX="$D/loader" >/dev/null
  cmake --install build/headers >/dev/null
  cmake -S "$S" -B build/loader -G Ninja -DCMAKE_BUILD_TYPE=Release -DLOADER_CODEGEN=ON \
    -DVULKAN_HEADERS_INSTALL_DIR="$D/loader" -DCMAKE_PREFIX_PATH="$D/loader" \
    -DCMAKE_INSTALL_PREFIX="$D/loader" -DBUILD_WSI_XCB_SUPPORT=OFF -DBUILD_WSI_XLIB_SUPPORT=OFF \
    -DBUILD_WSI_XLIB_XRANDR_SUPPORT=OFF -DBUILD_WSI_WAYLAND_SUPPORT=OFF -DBUILD_TESTS=OFF >/dev/null
  mkdir -p "$S/loader/generated"
  ninja -C build/loader loader_codegen >/dev/null
  ninja -C build/loader >/dev/null
  cmake --install build/loader >/dev/null
  [ -e loader/lib/libvulkan.so.1 ] || die "the loader build left no loader/lib/libvulkan.so.1"
  touch loader/.done
fi

cat >env.sh <<EOT
# Made by vapoursynth/ci-env.sh: VapourSynth R81 with lavapipe (Mesa $MESA_UPSTREAM) and a Vulkan 1.4
# loader. Only NF_VAPOURSYNTH_* variables: a process running the core applies the last two itself.
export NF_VAPOURSYNTH_LIB=$VS_DIR/libvapoursynth.so.4
export NF_VAPOURSYNTH_INCLUDE=$VS_DIR/include
export NF_VAPOURSYNTH_VULKAN_INCLUDE=$D/loader/include
export NF_VAPOURSYNTH_LD_LIBRARY_PATH=$D/loader/lib:$LIB
export NF_VAPOURSYNTH_VK_DRIVER_FILES=$D/lvp.json
export NF_VAPOURSYNTH_ENV=$D/env.sh
EOT
cat >vulkan-env.sh <<EOT
# Made by vapoursynth/ci-env.sh: for a shell that only runs VapourSynth (it replaces the Vulkan
# loader and driver of every program started from it).
. $D/env.sh
export LD_LIBRARY_PATH=\$NF_VAPOURSYNTH_LD_LIBRARY_PATH\${LD_LIBRARY_PATH:+:\$LD_LIBRARY_PATH}
export VK_DRIVER_FILES=\$NF_VAPOURSYNTH_VK_DRIVER_FILES
unset VK_ICD_FILENAMES VK_ADD_DRIVER_FILES
EOT

# 4. The check: a core on the lavapipe, in a child with the environment applied. Rebuilt only
#    when missing; run every time.
if [ ! -x check-env ]; then
  cat >check-env.c <<'EOT'
#define VS_USE_LATEST_API
#include <dlfcn.h>
#include <stdio.h>
#include "VSVulkan4.h"
int main(int argc, char **argv) {
    void *lib = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
    if (!lib) { fprintf(stderr, "%s\n", dlerror()); return 1; }
    VSGetVapourSynthAPI get = (VSGetVapourSynthAPI)dlsym(lib, "getVapourSynthAPI");
    const VSAPI *vs = get ? get(VAPOURSYNTH_API_VERSION) : NULL;
    if (!vs) { fprintf(stderr, "no VapourSynth API %#x\n", VAPOURSYNTH_API_VERSION); return 1; }
    VSCore *core = vs->createCore(0);
    VSCoreInfo2 ci; vs->getCoreInfo2(core, &ci);
    VSVulkanCoreInfo vi; char err[1024] = "";
    if (vs->getVulkanAPI()->getVulkanCoreInfo(core, &vi, err, sizeof err)) {
        fprintf(stderr, "getVulkanCoreInfo: %s\n", err); return 1;
    }
    printf("core R%d (API %#x), Vulkan device: %s, memory export %d\n",
        ci.coreVersion, ci.apiVersion, vi.deviceName, vi.exportHandleType);
    vs->freeCore(core);
    return vi.exportHandleType ? 0 : 1;
}
EOT
  ${CC:-cc} -O1 -o check-env.tmp -I"$VS_DIR/include" -I"$D/loader/include" check-env.c -ldl
  mv check-env.tmp check-env
fi
out=$(bash -c '. "$1"; exec "$2" "$NF_VAPOURSYNTH_LIB"' _ "$D/vulkan-env.sh" "$D/check-env" 2>&1) \
  || die "the environment does not work: $out"
say "$out"
say "ready: . $D/env.sh"
