#!/usr/bin/env bash
# One GPU session's runs, from the repository root on the GPU machine, with the
# kit stashed (.gpu-kit; bench/gpu-split.sh says how it and .gpu-bin travel now that one call
# carries 64 MiB with the repository) and the binaries built here in .gpu-bin (see README,
# "Tests"). Usage: bench/gpu-run.sh info|contract|tiles|tests|ring|examples|setup|serve|serve-bench|bench|bench-1080|torch|side-stream|passes|profile|defaults|final22|examples22|alltests|ttff|ttff2|m23|final3|stream26|capi|fused23|floor22|defaults22b|s5|s6a|s6b|s6c|fdgap|s7|s8|post10|s10|s11|s12|s13|s14|s15|s16|s17|s18|s19|s20|torchmax|device9|render9|quick23 ...   Logs go to
# $OUT/log (one file: the device tool brings back at most eight).
# defaults: issue 22 (one fast path for every frame, by default).
set -u
cd "$(dirname "${BASH_SOURCE[0]}")/.."
bash .gpu-kit/base/stash.sh >/dev/null && source .gpu-kit/base/env.sh
: "${OUT:=/tmp/out}"
mkdir -p "$OUT"
log="$OUT/log"
step() {
  local name=$1 limit=$2; shift 2
  echo "=== $name: $* ($(date +%T))" | tee -a "$log"
  timeout "$limit" "$@" 2>&1 | tee -a "$log"
  echo "=== $name: rc=${PIPESTATUS[0]}" | tee -a "$log"
}
tests=(--include-ignored --test-threads=1 --nocapture)
# cuDNN's runtime-fusion engines compile with NVRTC: say where libnvrtc is (the system's, or
# PyTorch's wheel).
nvrtc() {
  step nvrtc 20 bash -c 'ldconfig -p | grep -i -E "nvrtc|cudnn" ; ls /usr/local/cuda*/lib64/libnvrtc* 2>/dev/null; true'
  if ! ldconfig -p | grep -q 'libnvrtc.so'; then
    nv=$(python3 -c 'import nvidia, os; print(os.path.dirname(nvidia.__path__[0] if hasattr(nvidia, "__path__") else nvidia.__file__))' 2>/dev/null || true)
    lib=$(find "${nv:-/nonexistent}" -name 'libnvrtc.so*' 2>/dev/null | head -1)
    [ -n "$lib" ] && export LD_LIBRARY_PATH="$(dirname "$lib"):${LD_LIBRARY_PATH:-}"
    echo "libnvrtc: ${lib:-not found}" | tee -a "$log"
  fi
}
# The examples with their defaults, FRAMES frames each, under the validation layer:
# foreign_renderer in both --share modes (compared with infer), then the client's render
# through a serve worker (its log into the step log). Steps are named with TAG
# ("example$TAG-fd", "serve-render$TAG"). Usage: examples FRAMES [TAG]
examples() {
  local frames=$1 tag=${2:-}
  for share in fd device; do
    step "example$tag-$share" 120 .gpu-bin/foreign_renderer --model models/upscale-fp16.onnx \
      --input models/coffee.png --output "$OUT/foreign-$share.png" --share "$share" --frames "$frames" --compare \
      --validation
  done
  NEURAL_FRAME_VALIDATION=1 serve_render "serve-render$tag" "$frames"
}
# serve_render NAME FRAMES [ARGS...]: the client's render example through a worker of its own
# (WORKER_ARGS: more arguments for the worker).
serve_render() {
  local name=$1 frames=$2; shift 2
  sock="$OUT/serve.sock"
  rm -f "$sock"
  # shellcheck disable=SC2086
  .gpu-bin/neural-frame serve --socket "$sock" --model models/upscale-fp16.onnx ${WORKER_ARGS:-} \
    >"$OUT/serve-worker.log" 2>&1 &
  worker=$!
  for _ in $(seq 600); do [ -S "$sock" ] && break; sleep 0.1; done
  step "$name" 120 .gpu-bin/render --socket "$sock" --input models/coffee.png --output "$OUT/served.png" \
    --frames "$frames" "$@"
  kill "$worker"; wait "$worker"
  cat "$OUT/serve-worker.log" | tee -a "$log"
}
# Benches of s6b, s7 and quick23: nb NAME ARGS... runs `neural-frame bench ARGS` as step NAME, its
# JSON into $OUT/bench (bench_tar packs that folder into bench.tgz, or bench-N.tgz after the first, and drops the pictures and the worker's log);
# f16_540 is the fp16 file at 540p (a name no group sets), best the options forced by hand.
# torch_both DIR runs torch.compile at 540p and 1080p, JSON into DIR.
b="$OUT/bench"
f16_540=(--model models/upscale-fp16.onnx --size 960x540 --frames 200)
best=(--passes cuda --prefer-nhwc --fuse-conv-bias --cuda-graph --post-wait host --spin-wait)
nb() {
  local name=$1; shift
  mkdir -p "$b"
  step "$name" 240 "${BIN:-.gpu-bin}"/neural-frame bench "$@" --json-file "$b/$name.json"
}
bench_tar() {
  local f="$OUT/bench.tgz" n=2
  while [ -e "$f" ]; do f="$OUT/bench-$n.tgz"; n=$((n + 1)); done
  tar -C "$OUT" -czf "$f" bench && rm -rf "$OUT/bench" "$OUT"/*.png "$OUT/serve-worker.log"
}
# s7's and s8's foreign_renderer in both --share modes in the draw order before (no --validation).
examples_behind() {
  for share in fd device; do
    step "example-$share-behind" 60 .gpu-bin/foreign_renderer --model models/upscale-fp16.onnx \
      --input models/coffee.png --output "$OUT/foreign-$share.png" --share "$share" --frames 3000 --compare \
      --draw-order behind
  done
}
# s7's and s8's last steps: the quick start, the fp32 file at 540p and 1080p, torch.compile at
# both, the kernel profile with the defaults; then the bench folder is packed.
model_steps() {
  step quick-start 60 .gpu-bin/neural-frame run --output "$OUT/upscaled.png"
  nb fp32-file-1 --size 960x540 --frames 200
  nb fp32-file-1080p --size 1920x1080 --frames 100
  torch_both "$b"
  export PYTHONUNBUFFERED=1
  step nf-profile-default 240 python3 bench/kernel_profile.py nf-profile models/upscale.onnx --size 960x540 \
    --fuse-conv-act default --json "$b/nf-profile-default.json"
  bench_tar
}
# nf_profile NAME [VAR=VALUE...]: the kernel profile of the fp32 file at 540p with the defaults
# (the variables set for it), into $b/NAME.json.
nf_profile() {
  local name=$1; shift
  mkdir -p "$b"
  PYTHONUNBUFFERED=1 step "$name" 240 env "$@" python3 bench/kernel_profile.py nf-profile models/upscale.onnx \
    --lib "${BIN:-.gpu-bin}/libneural_frame_c.so" --size 960x540 --fuse-conv-act default --json "$b/$name.json"
}
# s11's and s13's first half: the fused tail's GPU test, then the bench alternated with
# NEURAL_FRAME_FUSED_TAIL set to 0 and 1 (whatever the binaries' default), the fp16 file at 540p
# with no tuning flags, twice each (tail-off-f16-N, tail-on-f16-N).
tail_pairs() {
  step fused-tail-test 240 .gpu-bin/gpu_ring fused_tail_equals_the_post_kernels "${tests[@]}"
  for r in 1 2; do
    NEURAL_FRAME_FUSED_TAIL=0 nb tail-off-f16-$r "${f16_540[@]}"
    NEURAL_FRAME_FUSED_TAIL=1 nb tail-on-f16-$r "${f16_540[@]}"
  done
}
# conv_ab TAG V1 V2: s17's and s19's comparison of two builds (/var/tmp/nfbin-V1 and -V2): the
# kernel profile of the fp32 file at 540p, then its bench at 540p, the two alternated twice, then
# 1080p once each; a summary line (TAG V1 1: ...) of each profile's direct-convolution kernel,
# whole frame and ort-alone. No tuning flags.
conv_ab() {
  local tag=$1 r v; shift
  for r in 1 2; do
    for v in "$@"; do
      BIN=/var/tmp/nfbin-$v nf_profile profile-$v-$r
      BIN=/var/tmp/nfbin-$v nb fp32-file-$v-$r --size 960x540 --frames 200
    done
  done
  for v in "$@"; do
    BIN=/var/tmp/nfbin-$v nb fp32-file-1080p-$v --size 1920x1080 --frames 100
  done
  python3 - "$b" "$tag" "$@" <<'PY' | tee -a "$log"
import json, sys
folder, tag, builds = sys.argv[1], sys.argv[2], sys.argv[3:]
for r in (1, 2):
    for v in builds:
        try:
            m = json.load(open(f"{folder}/profile-{v}-{r}.json"))["modes"][0]
            conv = next(k for k in m["top_kernels"] if k["name"].startswith("nf_conv"))
            ort = next(x["median_ms"] for x in json.load(open(f"{folder}/fp32-file-{v}-{r}.json"))["modes"]
                       if x["mode"] == "ort-alone")
            print(f"{tag} {v}{r}: {conv['name']} {conv['us_per_call']:.1f} us; kernels a frame "
                  f"{m['profile']['kernel_ms_median']:.4f} ms; ort-alone 540p {ort:.4f} ms")
        except (OSError, KeyError, StopIteration) as e:
            print(f"{tag} {v}{r}: missing ({e})")
PY
}
torch_both() {
  step torch-540p 300 python3 bench/torch_side.py run .gpu-bin/upscale-weights.npz --size 960x540 --frames 200 \
    --json "$1/torch-540p.json"
  step torch-1080p 300 python3 bench/torch_side.py run .gpu-bin/upscale-weights.npz --size 1920x1080 \
    --frames 100 --json "$1/torch-1080p.json"
  # The faster baseline (2026-12-06-h100-s19: 2.809 against 3.122 ms at 540p): Inductor times
  # cuDNN's convolutions against its Triton templates.
  step torch-540p-max-autotune 400 python3 bench/torch_side.py run .gpu-bin/upscale-weights.npz --size 960x540 \
    --frames 200 --compile-mode max-autotune --json "$1/torch-540p-max-autotune.json"
  step torch-1080p-max-autotune 400 python3 bench/torch_side.py run .gpu-bin/upscale-weights.npz --size 1920x1080 \
    --frames 100 --compile-mode max-autotune --json "$1/torch-1080p-max-autotune.json"
}
for what in "$@"; do
  case "$what" in
    info)
      step nvidia-smi 20 nvidia-smi --query-gpu=name,driver_version,memory.used,memory.total --format=csv
      ;;
    contract)
      step contract 180 .gpu-bin/gpu_contract "${tests[@]}"
      ;;
    tests)
      step lib-gpu 120 .gpu-bin/neural_frame gpu_tests "${tests[@]}"
      step interop 120 .gpu-bin/gpu_interop "${tests[@]}"
      step pipeline 180 .gpu-bin/gpu_pipeline "${tests[@]}"
      step foreign 180 .gpu-bin/gpu_foreign "${tests[@]}"
      ;;
    serve)
      export NEURAL_FRAME_BIN="$PWD/.gpu-bin/neural-frame" NEURAL_FRAME_RENDER="$PWD/.gpu-bin/render"
      step serve-tests 400 .gpu-bin/gpu_serve "${tests[@]}"
      sock="$OUT/serve.sock"
      .gpu-bin/neural-frame serve --socket "$sock" --model models/upscale.onnx --backend cuda >"$OUT/serve-worker.log" 2>&1 &
      worker=$!
      for _ in $(seq 100); do [ -S "$sock" ] && break; sleep 0.1; done
      NEURAL_FRAME_VALIDATION=1 step serve-render 120 .gpu-bin/render --socket "$sock" --input models/coffee.png \
        --output "$OUT/served.png" --frames 300
      step serve-two-clients 120 bash -c '.gpu-bin/render --socket "$0" --input models/coffee.png --output "$1/two-a.png" \
        --frames 300 & a=$!; .gpu-bin/render --socket "$0" --input models/coffee.png --output "$1/two-b.png" \
        --frames 300; wait $a; echo "first client rc=$?"' "$sock" "$OUT"
      step serve-render-killed 60 bash -c '.gpu-bin/render --socket "$0" --input models/coffee.png --output /dev/null \
        --frames 100000 & c=$!; sleep 3; kill -9 '"$worker"'; wait $c; echo "render rc=$?"' "$sock"
      cat "$OUT/serve-worker.log" | tee -a "$log"
      ;;
    serve-bench)
      step bench-serve-fp32 240 .gpu-bin/neural-frame bench --serve --size 960x540 --frames 200 \
        --json-file "$OUT/bench-serve-fp32.json"
      step bench-serve-fp16 240 .gpu-bin/neural-frame bench --serve --model models/upscale-fp16.onnx --size 960x540 \
        --frames 200 --prefer-nhwc --cuda-graph --post-wait host --spin-wait --json-file "$OUT/bench-serve-fp16.json"
      ;;
    setup)
      # What the machine has, stage 3 (the CUDA provider registers and equals the CPU), the
      # library example on the CUDA backend, then stage 3 again with the system's library
      # cache hidden (a private mount namespace): the provider's error must name each
      # missing CUDA library and its PyPI package.
      step cuda-libraries 20 bash -c "ldconfig -p | grep -E 'libcublas|libcudnn[.]|libcufft[.]|libcurand[.]|libcudart[.]'"
      step preflight-3 120 .gpu-bin/neural-frame preflight --stage 3
      step upscale-file 120 .gpu-bin/upscale_file models/coffee.png "$OUT/upscale-file.png"
      # Hidden: the system's library cache (a private mount namespace) and every CUDA directory on
      # LD_LIBRARY_PATH; cuDNN in /lib/x86_64-linux-gnu (a default directory) stays visible.
      no_cuda_path="$(echo "$LD_LIBRARY_PATH" | tr : '\n' | grep -v cuda | paste -sd:)"
      step preflight-3-hidden 120 env LD_LIBRARY_PATH="$no_cuda_path" unshare -m sh -c \
        'mount --bind /dev/null /etc/ld.so.cache && exec "$@"' sh .gpu-bin/neural-frame preflight --stage 3
      ;;
    ring)
      step ring 300 .gpu-bin/gpu_ring "${tests[@]}"
      ;;
    examples)
      for share in fd device; do
        step "example-$share" 120 .gpu-bin/foreign_renderer --model models/upscale.onnx --input models/coffee.png \
          --output "$OUT/foreign-$share.png" --share "$share" --frames 300 --backend cuda --compare --validation
      done
      step preflight 120 .gpu-bin/neural-frame preflight --validation
      step quick-start 60 .gpu-bin/neural-frame run --output "$OUT/upscaled.png"
      ;;
    bench)
      step bench-fp32 240 .gpu-bin/neural-frame bench --size 960x540 --frames 200 --diagnose \
        --json-file "$OUT/bench-fp32.json"
      step bench-fp16 240 .gpu-bin/neural-frame bench --model models/upscale-fp16.onnx --size 960x540 --frames 200 \
        --diagnose --prefer-nhwc --cuda-graph --post-wait host --spin-wait \
        --json-file "$OUT/bench-fp16.json"
      ;;
    bench-1080)
      step bench-fp16-1080p 300 .gpu-bin/neural-frame bench --model models/upscale-fp16.onnx --size 1920x1080 \
        --frames 100 --prefer-nhwc --cuda-graph --post-wait host --spin-wait --json-file "$OUT/bench-fp16-1080p.json"
      ;;
    tiles)
      # Issue 14: 4K and 8K inputs (×4: 15360×8640 and 30720×17280 outputs) in tiles of
      # 2000×1152 (overlap 24: 4 and 16 tiles), against whole frames where they fit.
      fp16=(--model models/upscale-fp16.onnx --prefer-nhwc --cuda-graph --post-wait host --spin-wait --frames 10 --warmup 2)
      step bench-4k-whole 300 .gpu-bin/neural-frame bench "${fp16[@]}" --size 3840x2160 --json-file "$OUT/bench-4k-whole.json"
      step bench-4k-tiles 300 .gpu-bin/neural-frame bench "${fp16[@]}" --size 3840x2160 --tile 2000x1152 \
        --json-file "$OUT/bench-4k-tiles.json"
      step bench-8k-tiles 400 .gpu-bin/neural-frame bench "${fp16[@]}" --size 7680x4320 --tile 2000x1152 \
        --json-file "$OUT/bench-8k-tiles.json"
      step bench-8k-whole 300 .gpu-bin/neural-frame bench "${fp16[@]}" --size 7680x4320 --json-file "$OUT/bench-8k-whole.json"
      ;;
    passes)
      # Issue 13: the pre and post passes as CUDA kernels on the model's stream (no Vulkan
      # work and no cross-API semaphore per frame), and the convolutions' bias fused by cuDNN:
      # the GPU tests, then the benches, one process each; JSON in one tarball (8 files back).
      step passes-tests 300 .gpu-bin/gpu_passes "${tests[@]}"
      mkdir -p "$OUT/bench"
      b="$OUT/bench"
      tuned=(--prefer-nhwc --cuda-graph --post-wait host --spin-wait)
      fp16=(--model models/upscale-fp16.onnx "${tuned[@]}")
      step bench-fp32-vulkan 240 .gpu-bin/neural-frame bench --size 960x540 --frames 200 --diagnose \
        --json-file "$b/bench-fp32-vulkan.json"
      step bench-fp32-cuda 240 .gpu-bin/neural-frame bench --size 960x540 --frames 200 --diagnose --passes cuda \
        --json-file "$b/bench-fp32-cuda.json"
      step bench-fp32-cuda-fused 240 .gpu-bin/neural-frame bench --size 960x540 --frames 200 --diagnose --passes cuda \
        "${tuned[@]}" --fuse-conv-bias --json-file "$b/bench-fp32-cuda-fused.json"
      step bench-fp16-vulkan 240 .gpu-bin/neural-frame bench "${fp16[@]}" --size 960x540 --frames 200 --diagnose \
        --json-file "$b/bench-fp16-vulkan.json"
      step bench-fp16-cuda 240 .gpu-bin/neural-frame bench "${fp16[@]}" --size 960x540 --frames 200 --diagnose \
        --passes cuda --json-file "$b/bench-fp16-cuda.json"
      step bench-fp16-cuda-fused 240 .gpu-bin/neural-frame bench "${fp16[@]}" --size 960x540 --frames 200 --diagnose \
        --passes cuda --fuse-conv-bias --json-file "$b/bench-fp16-cuda-fused.json"
      step bench-fp16-1080p-vulkan 300 .gpu-bin/neural-frame bench "${fp16[@]}" --size 1920x1080 --frames 100 \
        --json-file "$b/bench-fp16-1080p-vulkan.json"
      step bench-fp16-1080p-cuda-fused 300 .gpu-bin/neural-frame bench "${fp16[@]}" --size 1920x1080 --frames 100 \
        --passes cuda --fuse-conv-bias --json-file "$b/bench-fp16-1080p-cuda-fused.json"
      tar -C "$OUT" -czf "$OUT/bench.tgz" bench && rm -rf "$OUT/bench"
      ;;
    profile)
      # Issue 13, the model path: per-kernel GPU profiles (torch.profiler) of ONNX Runtime's CUDA
      # provider and of PyTorch eager / torch.compile on the same weights, and a sweep of the
      # provider's options (bench/kernel_profile.py; ONNX Runtime's Python package from
      # bench/pack_ort_python.sh, carried as .gpu-kit/py). One tarball: at most 8 files come back.
      eval "$(bash .gpu-kit/py/unpack.sh)"
      export PYTHONUNBUFFERED=1
      mkdir -p "$OUT/profile"
      k=(python3 bench/kernel_profile.py)
      p="$OUT/profile"
      step ort-fp16-nhwc 180 "${k[@]}" ort-profile models/upscale-fp16.onnx --size 960x540 --opt prefer_nhwc=1 \
        --json "$p/ort-fp16-nhwc.json"
      step ort-fp16-nchw 180 "${k[@]}" ort-profile models/upscale-fp16.onnx --size 960x540 --json "$p/ort-fp16-nchw.json"
      step ort-fp32 180 "${k[@]}" ort-profile models/upscale.onnx --size 960x540 --json "$p/ort-fp32.json"
      step torch-eager 180 "${k[@]}" torch-profile .gpu-bin/upscale-weights.npz --size 960x540 --json "$p/torch-eager.json"
      step torch-compile 300 "${k[@]}" torch-profile .gpu-bin/upscale-weights.npz --size 960x540 --compile \
        --json "$p/torch-compile.json"
      step compare 30 "${k[@]}" compare "$p/ort-fp16-nhwc.json" "$p/ort-fp16-nchw.json" "$p/torch-eager.json" \
        "$p/torch-compile.json"
      step sweep-fp16 300 "${k[@]}" sweep models/upscale-fp16.onnx --size 960x540 --max-seconds "${SWEEP_SECONDS:-200}" \
        --json "$p/sweep-fp16.json"
      tar -C "$OUT" -czf "$OUT/profile.tgz" profile && rm -rf "$OUT/profile"
      ;;
    side-stream)
      # Issue 13's experiment: the CUDA wait for "input ready" on a side stream, joined by an
      # event, against the same run without it (each pair back to back, one process each).
      for side in "" --side-stream-wait; do
        tag=${side:+-side}
        step "bench-fp32$tag" 240 .gpu-bin/neural-frame bench --size 960x540 --frames 200 --diagnose $side \
          --json-file "$OUT/bench-fp32$tag.json"
        step "bench-fp16$tag" 240 .gpu-bin/neural-frame bench --model models/upscale-fp16.onnx --size 960x540 \
          --frames 200 --diagnose --prefer-nhwc --cuda-graph --post-wait host --spin-wait $side \
          --json-file "$OUT/bench-fp16$tag.json"
      done
      ;;
    defaults)
      # Issue 22: what a user gets naming only the model (fp16, 960×540), against the best
      # options forced by hand in the same session; the served and the renderer's own frames
      # with no tuning flags (the examples at their 600×400 with an in-process bench beside).
      mkdir -p "$OUT/bench"
      b="$OUT/bench"
      best=(--passes cuda --prefer-nhwc --fuse-conv-bias --cuda-graph --post-wait host --spin-wait)
      step defaults-fp16 240 .gpu-bin/neural-frame bench --model models/upscale-fp16.onnx --size 960x540 \
        --frames 200 --json-file "$b/defaults-fp16.json"
      step best-fp16 240 .gpu-bin/neural-frame bench --model models/upscale-fp16.onnx --size 960x540 --frames 200 \
        "${best[@]}" --json-file "$b/best-fp16.json"
      # The driver's JIT cache now holds cuDNN's fused kernels: the first frame again, warm.
      step defaults-fp16-again 240 .gpu-bin/neural-frame bench --model models/upscale-fp16.onnx --size 960x540 \
        --frames 200 --json-file "$b/defaults-fp16-again.json"
      # tune writes its cache (the default path); the next bench's context reads it.
      step tune-fp16 300 .gpu-bin/neural-frame tune --model models/upscale-fp16.onnx --size 960x540 --frames 100 \
        --json-file "$b/tune-fp16.json"
      step tuned-fp16 240 .gpu-bin/neural-frame bench --model models/upscale-fp16.onnx --size 960x540 \
        --frames 200 --json-file "$b/tuned-fp16.json"
      step caller-no-copies-fp16 240 .gpu-bin/neural-frame bench --model models/upscale-fp16.onnx --size 960x540 \
        --frames 200 --caller-no-copies --json-file "$b/caller-no-copies-fp16.json"
      step defaults-fp32 240 .gpu-bin/neural-frame bench --size 960x540 --frames 200 --json-file "$b/defaults-fp32.json"
      step defaults-fp16-600x400 240 .gpu-bin/neural-frame bench --model models/upscale-fp16.onnx --size 600x400 \
        --frames 200 --json-file "$b/defaults-fp16-600x400.json"
      step serve-defaults-fp16 240 .gpu-bin/neural-frame bench --serve --model models/upscale-fp16.onnx \
        --size 960x540 --frames 200 --json-file "$b/serve-defaults-fp16.json"
      examples 300 -defaults
      step quick-start 60 .gpu-bin/neural-frame run --output "$OUT/upscaled.png"
      tar -C "$OUT" -czf "$OUT/bench.tgz" bench && rm -rf "$OUT/bench"
      ;;
    final22)
      # Issue 22's measurements on the final code, no tuning flags unless said: fast start cold
      # then warm, the same bench by the previous session's last build (db74ecd: set-up in series,
      # the fused first run in build) for a baseline in this session, the best options forced,
      # the fp32 model, caller frames without the renderer's copies, serve, the examples at
      # 600×400 beside an in-process bench there, the quick start.
      mkdir -p "$OUT/bench"
      b="$OUT/bench"
      f16=(--model models/upscale-fp16.onnx --size 960x540 --frames 200)
      best=(--passes cuda --prefer-nhwc --fuse-conv-bias --cuda-graph --post-wait host --spin-wait)
      step defaults-cold 240 .gpu-bin/neural-frame bench "${f16[@]}" --json-file "$b/defaults-cold.json"
      step defaults 240 .gpu-bin/neural-frame bench "${f16[@]}" --json-file "$b/defaults.json"
      if [ -x .gpu-bin/neural-frame-db74ecd ]; then
        step db74ecd-defaults 240 .gpu-bin/neural-frame-db74ecd bench "${f16[@]}" --json-file "$b/db74ecd-defaults.json"
      fi
      step defaults-again 240 .gpu-bin/neural-frame bench "${f16[@]}" --json-file "$b/defaults-again.json"
      step best 240 .gpu-bin/neural-frame bench "${f16[@]}" "${best[@]}" --json-file "$b/best.json"
      step caller-no-copies 240 .gpu-bin/neural-frame bench "${f16[@]}" --caller-no-copies \
        --json-file "$b/caller-no-copies.json"
      # The renderer's per-frame work on a transfer-only queue (the copy engines) instead of its
      # graphics queue: does its Vulkan work stop costing the model time?
      step caller-transfer 240 .gpu-bin/neural-frame bench "${f16[@]}" --caller-queue transfer \
        --json-file "$b/caller-transfer.json"
      step caller-transfer-no-copies 240 .gpu-bin/neural-frame bench "${f16[@]}" --caller-queue transfer \
        --caller-no-copies --json-file "$b/caller-transfer-no-copies.json"
      step defaults-fp32 240 .gpu-bin/neural-frame bench --size 960x540 --frames 200 --json-file "$b/defaults-fp32.json"
      step serve-defaults 240 .gpu-bin/neural-frame bench --serve "${f16[@]}" --json-file "$b/serve-defaults.json"
      step in-process-600x400 240 .gpu-bin/neural-frame bench --model models/upscale-fp16.onnx --size 600x400 \
        --frames 200 --json-file "$b/in-process-600x400.json"
      for share in fd device; do
        step "example-$share" 120 .gpu-bin/foreign_renderer --model models/upscale-fp16.onnx \
          --input models/coffee.png --output "$OUT/foreign-$share.png" --share "$share" --frames 300 --compare \
          --validation
      done
      step example-fd-transfer 120 .gpu-bin/foreign_renderer --model models/upscale-fp16.onnx \
        --input models/coffee.png --output "$OUT/foreign-fd-transfer.png" --share fd --frames 300 --compare \
        --validation --transfer-queue
      for fast in false true; do
        sock="$OUT/serve-$fast.sock"
        .gpu-bin/neural-frame serve --socket "$sock" --model models/upscale-fp16.onnx --fast-start "$fast" \
          >"$OUT/serve-worker-$fast.log" 2>&1 &
        worker=$!
        for _ in $(seq 100); do [ -S "$sock" ] && break; sleep 0.1; done
        NEURAL_FRAME_VALIDATION=1 step "serve-render-fast-start-$fast" 120 .gpu-bin/render --socket "$sock" \
          --input models/coffee.png --output "$OUT/served-$fast.png" --frames 300
        kill "$worker"; wait "$worker"
        cat "$OUT/serve-worker-$fast.log" | tee -a "$log"
        rm -f "$OUT/serve-worker-$fast.log"
      done
      step quick-start 60 .gpu-bin/neural-frame run --output "$OUT/upscaled.png"
      tar -C "$OUT" -czf "$OUT/bench.tgz" bench && rm -rf "$OUT/bench"
      rm -f "$OUT"/*.png
      ;;
    examples22)
      # Issue 22: the examples at 600×400 with their defaults (foreign_renderer --share fd on a
      # transfer queue), 300 and 3000 frames, beside an in-process bench at that size.
      mkdir -p "$OUT/bench"
      step in-process-600x400 240 .gpu-bin/neural-frame bench --model models/upscale-fp16.onnx --size 600x400 \
        --frames 1000 --json-file "$OUT/bench/in-process-600x400-1000.json"
      for frames in 300 3000; do
        for share in fd device; do
          step "example-$share-$frames" 120 .gpu-bin/foreign_renderer --model models/upscale-fp16.onnx \
            --input models/coffee.png --output "$OUT/foreign.png" --share "$share" --frames "$frames" --compare \
            --validation
        done
      done
      sock="$OUT/serve.sock"
      .gpu-bin/neural-frame serve --socket "$sock" --model models/upscale-fp16.onnx --fast-start false \
        >"$OUT/serve-worker.log" 2>&1 &
      worker=$!
      for _ in $(seq 100); do [ -S "$sock" ] && break; sleep 0.1; done
      for frames in 300 3000; do
        NEURAL_FRAME_VALIDATION=1 step "serve-render-$frames" 120 .gpu-bin/render --socket "$sock" \
          --input models/coffee.png --output "$OUT/served.png" --frames "$frames"
      done
      kill "$worker"; wait "$worker"
      cat "$OUT/serve-worker.log" | tee -a "$log"
      tar -C "$OUT" -czf "$OUT/bench.tgz" bench && rm -rf "$OUT/bench" "$OUT"/*.png "$OUT/serve-worker.log"
      ;;
    alltests)
      # Every GPU test binary, serve's twice (an intermittent hang at teardown).
      export NEURAL_FRAME_BIN="$PWD/.gpu-bin/neural-frame" NEURAL_FRAME_RENDER="$PWD/.gpu-bin/render"
      step lib-gpu 120 .gpu-bin/neural_frame gpu_tests "${tests[@]}"
      step interop 120 .gpu-bin/gpu_interop "${tests[@]}"
      step passes 300 .gpu-bin/gpu_passes "${tests[@]}"
      step foreign 180 .gpu-bin/gpu_foreign "${tests[@]}"
      step contract 180 .gpu-bin/gpu_contract "${tests[@]}"
      step pipeline 180 .gpu-bin/gpu_pipeline "${tests[@]}"
      step ring 300 .gpu-bin/gpu_ring "${tests[@]}"
      step stream 300 .gpu-bin/gpu_stream "${tests[@]}"
      for k in $(seq "${SERVE_RUNS:-2}"); do
        step "serve-$k" 300 .gpu-bin/gpu_serve "${tests[@]}"
      done
      ;;
    ttff)
      # Where the first frame's time goes: the library's timeline (-vv), contexts built in a
      # warm process (examples/first_frames), and the bench's time to first frame with options
      # that may change it.
      f16=models/upscale-fp16.onnx
      for k in 1 2; do
        step "first-frames-$k" 120 .gpu-bin/first_frames --model "$f16" --size 960x540
      done
      step run-timeline 60 .gpu-bin/neural-frame run --model "$f16" -vv --output "$OUT/ttff.png"
      step ttff-defaults 120 .gpu-bin/neural-frame bench --model "$f16" --size 960x540 --frames 30 \
        --json-file "$OUT/ttff-defaults.json"
      step ttff-eager 120 env CUDA_MODULE_LOADING=EAGER .gpu-bin/neural-frame bench --model "$f16" --size 960x540 \
        --frames 30 --json-file "$OUT/ttff-eager.json"
      step ttff-nchw 120 .gpu-bin/neural-frame bench --model "$f16" --size 960x540 --frames 30 --prefer-nhwc false \
        --json-file "$OUT/ttff-nchw.json"
      step ttff-no-fast 120 .gpu-bin/neural-frame bench --model "$f16" --size 960x540 --frames 30 --fast-start false \
        --json-file "$OUT/ttff-no-fast.json"
      ;;
    ttff2)
      # After the preload and the fast restart: the timeline, contexts in a warm process, the
      # bench's time to first frame twice, and the resize test.
      f16=models/upscale-fp16.onnx
      for k in 1 2; do
        step "first-frames-$k" 120 .gpu-bin/first_frames --model "$f16" --size 960x540
      done
      step run-timeline 60 .gpu-bin/neural-frame run --model "$f16" -vv --output "$OUT/ttff.png"
      for k in 1 2; do
        step "ttff-defaults-$k" 120 .gpu-bin/neural-frame bench --model "$f16" --size 960x540 --frames 30 \
          --json-file "$OUT/ttff-defaults-$k.json"
      done
      step resize-test 120 .gpu-bin/gpu_pipeline resize_starts_fast_again cuda_frame_size_change "${tests[@]}"
      ;;
    m23)
      # Issue 23: the fp32 file with no options (converted to fp16 and rewritten at the first
      # build, cached after), each lever off in turn, the fp16 file, 1080p, and torch.compile.
      f32=models/upscale.onnx
      f16=models/upscale-fp16.onnx
      b() { local name=$1; shift; step "$name" 240 .gpu-bin/neural-frame bench --size 960x540 --frames 200 \
        --json-file "$OUT/$name.json" "$@"; }
      b f32-first-build --model "$f32"
      b f32-defaults --model "$f32"
      step precision-test 240 .gpu-bin/gpu_pipeline fp32_model_runs_in_fp16 resize_starts_fast_again "${tests[@]}"
      b f32-no-rewrites --model "$f32" --rewrite-graph false
      b f32-fp32 --model "$f32" --precision fp32
      b f32-fp32-no-rewrites --model "$f32" --precision fp32 --rewrite-graph false
      b f16-defaults --model "$f16"
      b f16-no-rewrites --model "$f16" --rewrite-graph false
      step f32-1080p 240 .gpu-bin/neural-frame bench --model "$f32" --size 1920x1080 --frames 100 \
        --json-file "$OUT/f32-1080p.json"
      step run-f32 60 .gpu-bin/neural-frame run --model "$f32" -v --output "$OUT/run-f32.png"
      step torch-540p 300 python3 bench/torch_side.py run .gpu-bin/upscale-weights.npz --size 960x540 --frames 200 \
        --json "$OUT/torch-540p.json"
      ;;
    final3)
      # The session's measurements on the final code, no tuning flags unless said: issue 22's
      # (the fp16 file at 540p twice, the best options forced, serve, the examples at 600×400
      # beside an in-process bench there), issue 23's (the fp32 file at 540p and 1080p), where
      # the first frames' time goes (examples/first_frames), and the quick start.
      mkdir -p "$OUT/bench"
      b="$OUT/bench"
      f16=(--model models/upscale-fp16.onnx --size 960x540 --frames 200)
      best=(--passes cuda --prefer-nhwc --fuse-conv-bias --cuda-graph --post-wait host --spin-wait)
      step defaults 240 .gpu-bin/neural-frame bench "${f16[@]}" --json-file "$b/defaults.json"
      step defaults-again 240 .gpu-bin/neural-frame bench "${f16[@]}" --json-file "$b/defaults-again.json"
      step best 240 .gpu-bin/neural-frame bench "${f16[@]}" "${best[@]}" --json-file "$b/best.json"
      step fp32-file 240 .gpu-bin/neural-frame bench --size 960x540 --frames 200 --json-file "$b/fp32-file.json"
      step fp32-file-1080p 240 .gpu-bin/neural-frame bench --size 1920x1080 --frames 100 \
        --json-file "$b/fp32-file-1080p.json"
      step serve-defaults 240 .gpu-bin/neural-frame bench --serve "${f16[@]}" --json-file "$b/serve-defaults.json"
      step in-process-600x400 240 .gpu-bin/neural-frame bench --model models/upscale-fp16.onnx --size 600x400 \
        --frames 1000 --json-file "$b/in-process-600x400.json"
      examples 3000
      step first-frames 120 .gpu-bin/first_frames --model models/upscale-fp16.onnx --size 960x540
      step first-frames-fp32-file 120 .gpu-bin/first_frames --model models/upscale.onnx --size 960x540
      step quick-start 60 .gpu-bin/neural-frame run --output "$OUT/upscaled.png"
      tar -C "$OUT" -czf "$OUT/bench.tgz" bench && rm -rf "$OUT/bench" "$OUT"/*.png "$OUT/serve-worker.log"
      ;;
    stream26)
      # Issue 26: a 540p → 4K y4m stream (the fp16 model, no tuning flags) through pipes, the
      # consumer discarding; beside the same session's bench (zero-copy pipelined, host pinned).
      mkdir -p "$OUT/stream"
      s="$OUT/stream"
      f16=(--model models/upscale-fp16.onnx)
      step bench-540p 240 .gpu-bin/neural-frame bench "${f16[@]}" --size 960x540 --frames 200 \
        --json-file "$s/bench-540p.json"
      for k in 1 2; do
        step "stream-pipe-$k" 240 bash -c "python3 bench/y4m_source.py --size 960x540 --frames 1200 \
          | .gpu-bin/neural-frame stream ${f16[*]} | cat >/dev/null"
      done
      step stream-file-out 240 bash -c "python3 bench/y4m_source.py --size 960x540 --frames 1200 \
        | .gpu-bin/neural-frame stream ${f16[*]} --output /dev/null"
      for d in 2 3 6; do
        step "stream-depth-$d" 240 bash -c "python3 bench/y4m_source.py --size 960x540 --frames 1200 \
          | .gpu-bin/neural-frame stream ${f16[*]} --depth $d | cat >/dev/null"
      done
      step stream-fp32-file 240 bash -c "python3 bench/y4m_source.py --size 960x540 --frames 1200 \
        | .gpu-bin/neural-frame stream | cat >/dev/null"
      tar -C "$OUT" -czf "$OUT/stream.tgz" stream && rm -rf "$OUT/stream"
      ;;
    capi)
      # Issue 24: the C++ renderer example (capi/examples/renderer.cpp, built here against
      # libneural_frame_c.so) on the CUDA backend, its result against nf_context_infer_rgba8
      # byte for byte (--compare), then under the validation layer.
      step capi-renderer 120 env LD_LIBRARY_PATH=".gpu-bin:${LD_LIBRARY_PATH:-}" .gpu-bin/renderer_cpp \
        --model models/upscale.onnx --input models/coffee.png --output "$OUT/capi-renderer.png" --backend cuda \
        --frames 30 --compare --report
      step capi-renderer-validation 120 env LD_LIBRARY_PATH=".gpu-bin:${LD_LIBRARY_PATH:-}" \
        VK_INSTANCE_LAYERS=VK_LAYER_KHRONOS_validation .gpu-bin/renderer_cpp --model models/upscale-fp16.onnx --input models/coffee.png \
        --output "$OUT/capi-renderer-f16.png" --backend cuda --frames 30 --compare
      echo "capi-renderer-validation: $(sed -n '/^=== capi-renderer-validation: env/,$p' "$log" | grep -c 'Validation Error' || true) validation errors in that step's output" | tee -a "$log"
      rm -f "$OUT"/capi-renderer*.png
      ;;
    fused23)
      # Issue 23 §3, first run on a GPU: the fused convolutions (--fuse-conv-act; then opt-in).
      # cuDNN's runtime-fusion engines compile with NVRTC: say where libnvrtc is (the system's, or
      # PyTorch's wheel), then the GPU test against ONNX Runtime's CPU run, and the bench with
      # and without the rewrite (the first fused build times every plan; the second reads the
      # plan cache: -v says whether it took the cached plans), the fp16 file, 1080p, and torch.compile in
      # the same session.
      nvrtc
      f32=models/upscale.onnx
      f16=models/upscale-fp16.onnx
      step fused-test 300 env RUST_LOG=info .gpu-bin/gpu_pipeline fused_convolutions "${tests[@]}"
      b() { local name=$1; shift; step "$name" 300 .gpu-bin/neural-frame bench --size 960x540 --frames 200 \
        --json-file "$OUT/$name.json" "$@"; }
      b f32-plain --model "$f32"
      b f32-fused-first -v --model "$f32" --fuse-conv-act
      b f32-fused-cached -v --model "$f32" --fuse-conv-act
      b f32-fused --model "$f32" --fuse-conv-act
      b f16-fused --model "$f16" --fuse-conv-act
      step f32-fused-1080p 300 .gpu-bin/neural-frame bench --model "$f32" --size 1920x1080 --frames 100 \
        --fuse-conv-act --json-file "$OUT/f32-fused-1080p.json"
      step torch-540p 300 python3 bench/torch_side.py run .gpu-bin/upscale-weights.npz --size 960x540 --frames 200 \
        --json "$OUT/torch-540p.json"
      ;;
    floor22)
      # Issue 22's time to first frame beside its floor: what a fresh process pays for CUDA's
      # driver alone and for PyTorch's first cuDNN forward (bench/startup_floor.py), then the
      # bench's time to first frame with the defaults twice (warm caches), same session.
      step startup-floor 240 python3 bench/startup_floor.py .gpu-bin/upscale-weights.npz --size 960x540 --runs 3 \
        --json "$OUT/startup-floor.json"
      for k in 1 2; do
        step "ttff-defaults-$k" 120 .gpu-bin/neural-frame bench --model models/upscale-fp16.onnx --size 960x540 \
          --frames 30 --json-file "$OUT/ttff-defaults-$k.json"
      done
      ;;
    defaults22b)
      # Issue 22's in-process targets at 200 frames: the fp16 file with no tuning flags twice,
      # and the best options forced by hand, same session.
      best=(--passes cuda --prefer-nhwc --fuse-conv-bias --cuda-graph --post-wait host --spin-wait)
      for k in 1 2; do
        step "defaults-fp16-$k" 240 .gpu-bin/neural-frame bench --model models/upscale-fp16.onnx --size 960x540 \
          --frames 200 --json-file "$OUT/defaults-fp16-$k.json"
      done
      step best-fp16 240 .gpu-bin/neural-frame bench --model models/upscale-fp16.onnx --size 960x540 --frames 200 \
        "${best[@]}" --json-file "$OUT/best-fp16.json"
      ;;
    s5)
      # A short device session, most needed first: the fused convolutions' plan cache (the first
      # process chooses, the next two read the cache; -v says whether they took it), without
      # them, every GPU test, the C++ example, issue 22's in-process targets, torch.compile,
      # the fp16 file and 1080p fused.
      nvrtc
      f32=models/upscale.onnx
      b() { local name=$1; shift; step "$name" 300 .gpu-bin/neural-frame bench --size 960x540 --frames 200 \
        --json-file "$OUT/$name.json" "$@"; }
      step fused-test 300 env RUST_LOG=info .gpu-bin/gpu_pipeline fused_convolutions "${tests[@]}"
      b f32-fused-first -v --model "$f32" --fuse-conv-act
      b f32-fused-cached -v --model "$f32" --fuse-conv-act
      b f32-fused --model "$f32" --fuse-conv-act
      b f32-plain --model "$f32"
      bash "$0" alltests capi defaults22b
      step torch-540p 300 python3 bench/torch_side.py run .gpu-bin/upscale-weights.npz --size 960x540 --frames 200 \
        --json "$OUT/torch-540p.json"
      b f16-fused --model models/upscale-fp16.onnx --fuse-conv-act
      step f32-fused-1080p 300 .gpu-bin/neural-frame bench --model "$f32" --size 1920x1080 --frames 100 \
        --fuse-conv-act --json-file "$OUT/f32-fused-1080p.json"
      ;;
    s6a)
      # Every GPU test and the C++ example after the fused convolutions became a default.
      nvrtc
      bash "$0" alltests capi
      ;;
    s6b)
      # Issues 22 and 23 in one session, no tuning flags unless said: the fp16 file at 540p (the
      # first process chooses cuDNN's plans, -v), twice more, the best options forced by hand, the
      # previous defaults (--fuse-conv-act false), caller frames with the renderer's copies on a
      # transfer queue (the miss's experiment), serve, time to first frame beside its floor, the
      # examples at 600×400 (3000 frames) beside an in-process bench there, the quick start;
      # then the fp32 file at 540p and 1080p, and torch.compile at both.
      nvrtc
      nb defaults-first -v "${f16_540[@]}"
      nb defaults-1 "${f16_540[@]}"
      nb defaults-2 "${f16_540[@]}"
      nb best "${f16_540[@]}" "${best[@]}"
      nb no-fused-conv "${f16_540[@]}" --fuse-conv-act false
      nb caller-transfer "${f16_540[@]}" --caller-queue transfer
      nb serve "${f16_540[@]}" --serve
      nb ttff-1 --model models/upscale-fp16.onnx --size 960x540 --frames 30
      nb ttff-2 --model models/upscale-fp16.onnx --size 960x540 --frames 30
      step startup-floor 240 python3 bench/startup_floor.py .gpu-bin/upscale-weights.npz --size 960x540 --runs 3 \
        --json "$b/startup-floor.json"
      nb in-process-600x400 --model models/upscale-fp16.onnx --size 600x400 --frames 1000
      examples 3000
      step quick-start 60 .gpu-bin/neural-frame run --output "$OUT/upscaled.png"
      nb fp32-file-1 --size 960x540 --frames 200
      nb fp32-file-2 --size 960x540 --frames 200
      nb fp32-file-1080p --size 1920x1080 --frames 100
      torch_both "$b"
      # Where the fp32 file's 540p frame goes, kernel by kernel, as neural-frame runs it (its C
      # API in a profiled Python process; no CUDA graphs), with and without the fused convolutions.
      export PYTHONUNBUFFERED=1
      for fused in default false; do
        step "nf-profile-$fused" 240 python3 bench/kernel_profile.py nf-profile models/upscale.onnx --size 960x540 \
          --fuse-conv-act "$fused" --json "$b/nf-profile-$fused.json"
      done
      bench_tar
      ;;
    s6c)
      # torch.compile's kernels at 540p beside nf-profile's (bench/kernel_profile.py).
      export PYTHONUNBUFFERED=1
      step torch-compile-profile 300 python3 bench/kernel_profile.py torch-profile .gpu-bin/upscale-weights.npz \
        --size 960x540 --compile --json "$OUT/torch-compile-profile.json"
      ;;
    fdgap)
      # Where the examples' gap to the in-process ring goes at 600×400 (run 2 of 2026-12-05:
      # foreign_renderer --share fd 773 against 911 frames/s, --share device 378, render via serve
      # 396). The suspicion: each frame's drawing was queued on the renderer's queue behind the
      # previous frame's copy out, which waits for that frame's result, and NVIDIA's queues run
      # their submissions in order, so frame n+1 reached the model only once frame n was done.
      # Both examples now draw ahead by default (--draw-order ahead); `behind` is the order before.
      # 3000 frames each, compared with infer, no --validation unless said (s6b's examples run
      # under it): each example with its defaults and behind; foreign_renderer --share fd also with
      # RGBA8 input images (--input-format rgba), the result copied out for the last frame alone
      # (--readback last), both, and both under the validation layer; then the defaults again
      # (drift). Beside them the in-process bench (pipelined) and its caller frames on the
      # transfer queue. About 100 s; a summary at the end.
      nvrtc
      mkdir -p "$OUT/fdgap"
      g="$OUT/fdgap"
      f16=(--model models/upscale-fp16.onnx)
      step fdgap-in-process-600x400 120 .gpu-bin/neural-frame bench "${f16[@]}" --size 600x400 --frames 1000 \
        --json-file "$g/in-process-600x400.json"
      fr() { local name=$1; shift; step "fdgap-$name" 60 .gpu-bin/foreign_renderer "${f16[@]}" \
        --input models/coffee.png --output "$g/fd.png" --frames 3000 --compare "$@"; }
      fr fd-defaults --share fd
      fr fd-behind --share fd --draw-order behind
      fr fd-rgba --share fd --input-format rgba
      fr fd-readback-last --share fd --readback last
      fr fd-rgba-last --share fd --input-format rgba --readback last
      fr fd-rgba-last-validation --share fd --input-format rgba --readback last --validation
      fr device-defaults --share device
      fr device-behind --share device --draw-order behind
      fr fd-graphics --share fd --graphics-queue
      sock="$OUT/serve.sock"
      .gpu-bin/neural-frame serve --socket "$sock" "${f16[@]}" >"$g/serve-worker.log" 2>&1 &
      worker=$!
      for _ in $(seq 600); do [ -S "$sock" ] && break; sleep 0.1; done
      for order in ahead behind; do
        step "fdgap-render-$order" 60 .gpu-bin/render --socket "$sock" --input models/coffee.png \
          --output "$g/served.png" --frames 3000 --draw-order "$order"
      done
      kill "$worker"; wait "$worker"
      cat "$g/serve-worker.log" | tee -a "$log"
      fr fd-defaults-again --share fd
      step fdgap-caller-transfer-600x400 120 .gpu-bin/neural-frame bench "${f16[@]}" --size 600x400 --frames 1000 \
        --caller-queue transfer --json-file "$g/caller-transfer-600x400.json"
      # One line per result: the example's frames/s, settings and comparison; the benches' pipelined
      # and caller frames rows.
      summary=$(name=""; while IFS= read -r line; do
        case "$line" in
          "=== fdgap-"*": .gpu-bin"*) name=${line#=== }; name=${name%%:*} ;;
          "=== fdgap-"*": rc="*) echo "${line#=== }"; name="" ;;
          "=== "*) name="" ;;
          "zero-copy pipelined "* | "caller frames "* | "settings: "* | "equal to NeuralFrameContext::infer"* | \
            "validation errors: "*) [ -n "$name" ] && echo "$name: $line" ;;
          *" frames/s) through "*) [ -n "$name" ] && echo "$name: $(grep -o '([0-9.]* frames/s)' <<<"$line")" ;;
          "render: draw order "* | "render: "*" frames/s, "*) [ -n "$name" ] && echo "$name: $line" ;;
        esac
      done <"$log")
      echo "=== fdgap summary" | tee -a "$log"
      echo "$summary" | tee -a "$log"
      rm -f "$g/fd.png" "$g/served.png"
      tar -C "$OUT" -czf "$OUT/fdgap.tgz" fdgap && rm -rf "$g"
      ;;
    s7)
      # A short session after s6a: s6b's steps that issues 22 and 23 ask for (the fp16 file at 540p
      # with no tuning flags, the best options forced, serve, time to first frame, the examples at
      # 600×400 beside the in-process ring, the quick start, the fp32 file at 540p and 1080p,
      # torch.compile at both, the kernel profile with the defaults), and foreign_renderer in both
      # --share modes in the draw order before (--draw-order behind, without --validation; fdgap
      # compares every setting). About 200 s.
      nvrtc
      nb defaults-first -v "${f16_540[@]}"
      nb defaults-1 "${f16_540[@]}"
      nb best "${f16_540[@]}" "${best[@]}"
      nb serve "${f16_540[@]}" --serve
      nb ttff-1 --model models/upscale-fp16.onnx --size 960x540 --frames 30
      nb in-process-600x400 --model models/upscale-fp16.onnx --size 600x400 --frames 1000
      examples 3000
      examples_behind
      model_steps
      ;;
    s8)
      # s7 for the closing session: the fp16 file at 540p with no tuning flags (twice after the first
      # process, and the first frame twice), the best options forced, serve, caller frames on the
      # renderer's graphics queue (--caller-queue main: the time-slicing the default transfer queue
      # avoids), the examples at 600×400 beside the in-process ring (with validation), in the draw
      # order before and, for render, on its main queue; the quick start, the fp32 file at 540p and
      # 1080p, torch.compile at both, the kernel profile with the defaults. About 230 s.
      nvrtc
      nb defaults-first -v "${f16_540[@]}"
      nb defaults-1 "${f16_540[@]}"
      nb defaults-2 "${f16_540[@]}"
      nb best "${f16_540[@]}" "${best[@]}"
      nb serve "${f16_540[@]}" --serve
      nb caller-main "${f16_540[@]}" --caller-queue main
      nb ttff-1 --model models/upscale-fp16.onnx --size 960x540 --frames 30
      nb ttff-2 --model models/upscale-fp16.onnx --size 960x540 --frames 30
      # The first frame while another process holds the GPU open (a CUDA context of PyTorch's), as
      # the persistence daemon or a running renderer would: what driver start-up costs the first frame.
      step persistence 20 nvidia-smi --query-gpu=persistence_mode --format=csv
      python3 -c 'import time, torch; torch.zeros(1, device="cuda"); print("holder: CUDA up", flush=True); time.sleep(90)' \
        >"$OUT/holder.log" 2>&1 &
      holder=$!
      for _ in $(seq 300); do grep -q 'CUDA up' "$OUT/holder.log" 2>/dev/null && break; sleep 0.1; done
      nb ttff-held-1 --model models/upscale-fp16.onnx --size 960x540 --frames 30
      nb ttff-held-2 --model models/upscale-fp16.onnx --size 960x540 --frames 30
      kill "$holder"; wait "$holder"; cat "$OUT/holder.log" | tee -a "$log"; rm -f "$OUT/holder.log"
      nb in-process-600x400 --model models/upscale-fp16.onnx --size 600x400 --frames 1000
      examples 3000
      examples_behind
      serve_render serve-render-main 3000 --queue main
      model_steps
      ;;
    post10)
      # The post kernel of four pixels a thread (nf_post_image4, the default) against one a thread
      # (NEURAL_FRAME_POST_PIXELS=1, nf_post_image), alternated: the fp16 file at 540p with no tuning
      # flags, then the kernel profile of each. About 110 s.
      for r in 1 2; do
        nb post4-$r "${f16_540[@]}"
        NEURAL_FRAME_POST_PIXELS=1 nb post1-$r "${f16_540[@]}"
      done
      nf_profile profile-post4
      nf_profile profile-post1 NEURAL_FRAME_POST_PIXELS=1
      bench_tar
      ;;
    s10)
      # The first convolution read directly (nf_conv_nchw, rewrite v4, the default) against padded
      # and transposed for cuDNN (NEURAL_FRAME_CONV_DIRECT=0, v3's graph), alternated: the fp16 file
      # and the fp32 file (issue 23's) at 540p, the fp32 file at 1080p, with no tuning flags; then
      # the first frame twice, torch.compile at both sizes, and the kernel profile of each. About 200 s.
      nvrtc
      for r in 1 2; do
        nb direct-f16-$r "${f16_540[@]}"
        NEURAL_FRAME_CONV_DIRECT=0 nb padded-f16-$r "${f16_540[@]}"
      done
      nb direct-fp32-file --size 960x540 --frames 200
      NEURAL_FRAME_CONV_DIRECT=0 nb padded-fp32-file --size 960x540 --frames 200
      nb direct-fp32-file-1080p --size 1920x1080 --frames 100
      NEURAL_FRAME_CONV_DIRECT=0 nb padded-fp32-file-1080p --size 1920x1080 --frames 100
      nb ttff-1 --model models/upscale-fp16.onnx --size 960x540 --frames 30
      nb ttff-2 --model models/upscale-fp16.onnx --size 960x540 --frames 30
      torch_both "$b"
      nf_profile profile-direct
      nf_profile profile-padded NEURAL_FRAME_CONV_DIRECT=0
      bench_tar
      ;;
    s11)
      # The fused tail (NEURAL_FRAME_FUSED_TAIL=1: the model's DepthToSpace writes the output image
      # itself, no post kernel): tail_pairs (its GPU test, then the fp16 file at 540p alternated
      # off and on), then the fp32 file (issue 23's) at 540p and 1080p off and on, no tuning
      # flags; then the examples with it on, compared with infer under the validation layer.
      # About 220 s.
      tail_pairs
      NEURAL_FRAME_FUSED_TAIL=0 nb tail-off-fp32-file --size 960x540 --frames 200
      NEURAL_FRAME_FUSED_TAIL=1 nb tail-on-fp32-file --size 960x540 --frames 200
      NEURAL_FRAME_FUSED_TAIL=0 nb tail-off-fp32-file-1080p --size 1920x1080 --frames 100
      NEURAL_FRAME_FUSED_TAIL=1 nb tail-on-fp32-file-1080p --size 1920x1080 --frames 100
      NEURAL_FRAME_FUSED_TAIL=1 examples 3000 -tail
      bench_tar
      ;;
    s12)
      # Every GPU test and the C++ example with the fused tail on (NEURAL_FRAME_FUSED_TAIL=1): what
      # turning it on by default needs beside s11 (s6a runs them with it off). About 200 s.
      nvrtc
      NEURAL_FRAME_FUSED_TAIL=1 bash "$0" alltests capi
      ;;
    s13)
      # s11's first half (tail_pairs), then the kernel profile of each (the fp32 file). Writes
      # /var/tmp/nf-choice: `on` where the test passed and the tail's pipelined frames/s (mean of
      # its two fp16 runs) beat the post kernels', else `off` (the next calls run the binaries
      # built with that default). About 80 s.
      nvrtc
      tail_pairs
      nf_profile profile-tail-off NEURAL_FRAME_FUSED_TAIL=0
      nf_profile profile-tail-on NEURAL_FRAME_FUSED_TAIL=1
      passed=no
      [ "$(grep '^=== fused-tail-test: rc=' "$log" | tail -1)" = "=== fused-tail-test: rc=0" ] && passed=yes
      verdict=$(python3 - "$b" "$passed" <<'PY'
import json, sys
def fps(name):
    d = json.load(open(f"{sys.argv[1]}/{name}.json"))
    return next(m["fps"] for m in d["modes"] if m["mode"] == "zero-copy pipelined")
off = [fps(f"tail-off-f16-{r}") for r in (1, 2)]
on = [fps(f"tail-on-f16-{r}") for r in (1, 2)]
print(f"pipelined frames/s off {off}, on {on}, test passed: {sys.argv[2]}")
print("on" if sys.argv[2] == "yes" and sum(on) > sum(off) else "off")
PY
      )
      echo "$verdict" | tee -a "$log"
      choice=$(tail -1 <<<"$verdict")
      [ "$choice" = on ] || choice=off
      echo "$choice" >/var/tmp/nf-choice
      echo "=== s13 choice: $(cat /var/tmp/nf-choice)" | tee -a "$log"
      bench_tar
      ;;
    s14)
      # The 16-byte surface stores (RGBA8 texels four in one sust.b.2d.v4.b32, in nf_post_image4 and
      # the tiled fused tail): gpu_passes (the post kernels' images byte for byte, odd widths
      # included); then, where BEFORE names a folder of binaries built without them, the fp16 file
      # at 540p and the kernel profile with those (BIN=$BEFORE) alternated with these, the tail
      # off; then s13. About 170 s.
      nvrtc
      step passes 300 .gpu-bin/gpu_passes "${tests[@]}"
      if [ -n "${BEFORE:-}" ]; then
        for r in 1 2; do
          BIN=$BEFORE NEURAL_FRAME_FUSED_TAIL=0 nb before-f16-$r "${f16_540[@]}"
          NEURAL_FRAME_FUSED_TAIL=0 nb stores-f16-$r "${f16_540[@]}"
        done
        BIN=$BEFORE nf_profile profile-before NEURAL_FRAME_FUSED_TAIL=0
        bench_tar
      fi
      bash "$0" s13
      ;;
    s15)
      # The bench's per-mode warm-up (3d4b411: each mode at least 0.5 s in its own pattern) on the
      # fp16 file at 540p with no tuning flags, twice, with the GPU's clocks, power and clock
      # event reasons sampled every 50 ms beside it into $OUT/clocks.csv: whether the warm-up
      # removes the ring's start-up transient of 2026-12-06-h100-s14, and what the transient
      # was. About 30 s; s8 and s6a after it give issue 22's and 23's numbers.
      nvrtc
      nvidia-smi --query-gpu=timestamp,clocks.sm,clocks.mem,power.draw,temperature.gpu,clocks_event_reasons.active \
        --format=csv -lms 50 >"$OUT/clocks.csv" 2>&1 &
      smi=$!
      nb warm-f16-1 "${f16_540[@]}"
      nb warm-f16-2 "${f16_540[@]}"
      kill "$smi"; wait "$smi"
      bench_tar
      ;;
    s16)
      # nf_conv3x3_nchw (a 3×3 stride-1 first convolution in tiles, the input window in shared
      # memory) against the build without it: the direct kernels' GPU test on the build with it
      # (B, /var/tmp/nfbin-b), then the kernel profile of the fp32 file at 540p and that file's
      # bench at 540p and 1080p, A (/var/tmp/nfbin-a) and B alternated, no tuning flags. Writes
      # /var/tmp/nf-choice: b where the test passed and B's profiled kernels took less time a
      # frame than A's, else a; .gpu-bin then points at that build. About 150 s.
      nvrtc
      step conv-test 240 /var/tmp/nfbin-b/neural_frame the_direct_kernel_matches_the_cpu_kernel "${tests[@]}"
      for v in a b; do
        BIN=/var/tmp/nfbin-$v nf_profile profile-$v
        BIN=/var/tmp/nfbin-$v nb fp32-file-$v --size 960x540 --frames 200
        BIN=/var/tmp/nfbin-$v nb fp32-file-1080p-$v --size 1920x1080 --frames 100
      done
      passed=no
      [ "$(grep '^=== conv-test: rc=' "$log" | tail -1)" = "=== conv-test: rc=0" ] && passed=yes
      verdict=$(python3 - "$b" "$passed" <<'PY'
import json, sys
def kernels(v):
    return json.load(open(f"{sys.argv[1]}/profile-{v}.json"))["modes"][0]["profile"]["kernel_ms_median"]
def ort(name):
    d = json.load(open(f"{sys.argv[1]}/{name}.json"))
    return next(m["median_ms"] for m in d["modes"] if m["mode"] == "ort-alone")
a, b = kernels("a"), kernels("b")
print(f"kernels a frame (median): a {a:.4f} ms, b {b:.4f} ms; ort-alone 540p a {ort('fp32-file-a'):.4f} b "
      f"{ort('fp32-file-b'):.4f}, 1080p a {ort('fp32-file-1080p-a'):.4f} b {ort('fp32-file-1080p-b'):.4f}; "
      f"test passed: {sys.argv[2]}")
print("b" if sys.argv[2] == "yes" and b < a else "a")
PY
      )
      echo "$verdict" | tee -a "$log"
      choice=$(tail -1 <<<"$verdict")
      [ "$choice" = b ] || choice=a
      echo "$choice" >/var/tmp/nf-choice
      rm -rf .gpu-bin && ln -s "/var/tmp/nfbin-$choice" .gpu-bin
      echo "=== s16 choice: $choice" | tee -a "$log"
      bench_tar
      ;;
    s17)
      # s16's comparison again, after its first profile failed (no bench folder yet): the kernel
      # profile of the fp32 file at 540p, then its bench at 540p, A (/var/tmp/nfbin-a, without
      # nf_conv3x3_nchw) and B (/var/tmp/nfbin-b, with it) alternated twice, then 1080p once
      # each; a summary line of each profile's direct-convolution kernel and whole frame. No
      # tuning flags. About 180 s.
      nvrtc
      conv_ab s17 a b
      bench_tar
      ;;
    s18)
      # nf_conv3x3_mma in the library: the direct kernels' GPU test (which kernel ran, against the
      # operator's CPU kernel), the kernels launched alone (bench/conv_probe.py), then s8 (issue
      # 22's and 23's numbers with no tuning flags). s6a after it runs every GPU test. About 270 s.
      nvrtc
      step conv-test 240 .gpu-bin/neural_frame the_direct_kernel_matches_the_cpu_kernel "${tests[@]}"
      PYTHONUNBUFFERED=1 step conv-probe 120 python3 bench/conv_probe.py --json "$OUT/conv-probe.json"
      bash "$0" s8
      ;;
    s19)
      # nf_conv3x3_mma in the library against main's build: the direct kernels' GPU test and
      # conv_probe.py, then the kernel profile of the fp32 file at 540p and its bench at 540p,
      # A (/var/tmp/nfbin-a, main) and M (/var/tmp/nfbin-mma) alternated twice, 1080p once each,
      # a summary line of each; then on .gpu-bin (point it at M): the quick start, the fp16 file
      # at 540p, torch.compile at both sizes. No tuning flags. About 330 s.
      nvrtc
      step conv-test 240 /var/tmp/nfbin-mma/neural_frame the_direct_kernel_matches_the_cpu_kernel "${tests[@]}"
      PYTHONUNBUFFERED=1 step conv-probe 120 python3 bench/conv_probe.py --json "$OUT/conv-probe.json"
      conv_ab s19 a mma
      step quick-start 60 .gpu-bin/neural-frame run --output "$OUT/upscaled.png"
      nb defaults-f16 "${f16_540[@]}"
      torch_both "$b"
      bench_tar
      ;;
    s20)
      # A tail's last convolution padded to 64 filters (the default) against its 48
      # (NEURAL_FRAME_TAIL_PAD=0), one build: the DepthToSpace GPU tests (the CUDA kernel with
      # padded pixels, the padded upscaler against the CPU run of the file) and the fused tail's;
      # then the kernel profile of the fp32 file at 540p and its bench at 540p, the two
      # alternated twice, 1080p once each, a summary line of each. No tuning flags. About 200 s.
      nvrtc
      step shuffle-tests 240 .gpu-bin/neural_frame shuffle "${tests[@]}"
      step fused-tail-test 240 .gpu-bin/gpu_ring fused_tail_equals_the_post_kernels "${tests[@]}"
      for r in 1 2; do
        for v in pad tail48; do
          export NEURAL_FRAME_TAIL_PAD=$([ $v = pad ] && echo 1 || echo 0)
          nf_profile profile-$v-$r
          nb fp32-file-$v-$r --size 960x540 --frames 200
        done
      done
      for v in pad tail48; do
        export NEURAL_FRAME_TAIL_PAD=$([ $v = pad ] && echo 1 || echo 0)
        nb fp32-file-1080p-$v --size 1920x1080 --frames 100
      done
      unset NEURAL_FRAME_TAIL_PAD
      python3 - "$b" <<'PY' | tee -a "$log"
import json, sys
for r in (1, 2):
    for v in ("pad", "tail48"):
        try:
            m = json.load(open(f"{sys.argv[1]}/profile-{v}-{r}.json"))["modes"][0]
            convs = [k for k in m["top_kernels"] if "fprop" in k["name"] or "xmma" in k["name"]]
            ort = next(x["median_ms"] for x in json.load(open(f"{sys.argv[1]}/fp32-file-{v}-{r}.json"))["modes"]
                       if x["mode"] == "ort-alone")
            names = "; ".join(f"{k['name'][:60]} {k['us_per_call']:.1f} us" for k in convs)
            print(f"s20 {v}{r}: {names}; kernels a frame {m['profile']['kernel_ms_median']:.4f} ms; "
                  f"ort-alone 540p {ort:.4f} ms")
        except (OSError, KeyError, StopIteration) as e:
            print(f"s20 {v}{r}: missing ({e})")
PY
      bench_tar
      ;;
    torchmax)
      # torch.compile with mode max-autotune (Inductor times cuDNN's convolution against its own
      # Triton templates for each shape): the baseline a user who tunes PyTorch would write, at
      # 540p and 1080p. About 80 s.
      for s in 960x540:200 1920x1080:100; do
        step "torch-${s%%:*}-max-autotune" 400 python3 bench/torch_side.py run .gpu-bin/upscale-weights.npz \
          --size "${s%%:*}" --frames "${s##*:}" --compile-mode max-autotune --json "$OUT/torch-${s%%:*}-max-autotune.json"
      done
      ;;
    device9)
      # What each change of foreign_renderer --share device does (at 600x400, 3000 frames, compared
      # with infer, no --validation): the renderer's copies on its transfer queue and its timelines
      # exportable (the defaults, in s8's examples), then each taken back, then both (the example as
      # 2026-12-05-h100-s8 ran it). About 30 s.
      for v in "plain --timelines plain" "graphics --graphics-queue" "plain-graphics --timelines plain --graphics-queue"; do
        read -r -a w <<<"$v"
        step "example-device-${w[0]}" 60 .gpu-bin/foreign_renderer --model models/upscale-fp16.onnx \
          --input models/coffee.png --output "$OUT/foreign-device.png" --share device --frames 3000 --compare \
          "${w[@]:1}"
      done
      ;;
    render9)
      # Where render's last 9 % against the in-process ring goes (2026-12-05-h100-s8 run 2: 861 of
      # 949 frames/s at 600×400): the in-process ring again, render as before, then deeper rings
      # on the client and the worker, and render on its main queue beside them. About 40 s.
      nb in-process-600x400 --model models/upscale-fp16.onnx --size 600x400 --frames 1000
      nb in-process-600x400-6 --model models/upscale-fp16.onnx --size 600x400 --frames 1000 --slots 6
      serve_render render-3 3000
      WORKER_ARGS="--slots 6" serve_render render-6 3000 --slots 6
      WORKER_ARGS="--slots 8" serve_render render-8 3000 --slots 8
      serve_render render-3-behind 3000 --draw-order behind
      bench_tar
      ;;
    quick23)
      # The model's speed alone, for a session too short for s7: the fp16 file at 540p and the fp32
      # file at 540p and 1080p, no tuning flags (torch.compile not run: no comparison in this group).
      nb defaults-1 --model models/upscale-fp16.onnx --size 960x540 --frames 200
      nb fp32-file-1 --size 960x540 --frames 200
      nb fp32-file-1080p --size 1920x1080 --frames 100
      bench_tar
      ;;
    torch)
      # The PyTorch side by side, on weights exported here (bench/torch_side.py export).
      torch_both "$OUT"
      ;;
  esac
done
