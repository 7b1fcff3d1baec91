#!/usr/bin/env bash
# Issue 22: where the fd example's gap to the in-process ring goes (frame size, ring depth).
set -u
bash .gpu-kit/base/stash.sh >/dev/null && source .gpu-kit/base/env.sh
log="$OUT/log"
step() { local name=$1 limit=$2; shift 2; echo "=== $name: $* ($(date +%T))" | tee -a "$log"; timeout "$limit" "$@" 2>&1 | tee -a "$log"; echo "=== $name: rc=${PIPESTATUS[0]}" | tee -a "$log"; }
f16=models/upscale-fp16.onnx
step in-process-960x540 120 .gpu-bin/neural-frame bench --model $f16 --size 960x540 --frames 1000 --json-file "$OUT/in-process-960x540.json"
step in-process-600x400 120 .gpu-bin/neural-frame bench --model $f16 --size 600x400 --frames 1000 --json-file "$OUT/in-process-600x400.json"
for ring in 3 6; do
  step "fd-960x540-ring$ring" 120 .gpu-bin/foreign_renderer --model $f16 --input .exp/scene-960x540.png --output "$OUT/x.png" --share fd --frames 3000 --ring $ring --compare
  step "fd-600x400-ring$ring" 120 .gpu-bin/foreign_renderer --model $f16 --input models/coffee.png --output "$OUT/x.png" --share fd --frames 3000 --ring $ring --compare
done
step device-960x540 120 .gpu-bin/foreign_renderer --model $f16 --input .exp/scene-960x540.png --output "$OUT/x.png" --share device --frames 3000 --compare
rm -f "$OUT/x.png"
