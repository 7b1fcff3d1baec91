#!/usr/bin/env bash
# The benchmark suite, for any machine with an NVIDIA GPU (it runs on the CPU backend too,
# announced). Build first: cargo build --release
#
#   bench/suite.sh quick [--out DIR] [-- BENCH_ARGS...]
#       neural-frame preflight, then `neural-frame bench --size 960x540 --frames 200`.
#   bench/suite.sh full [--out DIR] [-- BENCH_ARGS...]
#       quick, then 1920x1080, the fp16 file, `neural-frame stream` of a y4m 4:4:4 and 4:2:0
#       stream into /dev/null (bench/y4m_source.py, needs numpy), the GPU tests
#       (`cargo test --release -- --include-ignored --test-threads=1`, where cargo is
#       installed) and the PyTorch baseline (bench/torch_side.py, where torch is importable).
#   bench/suite.sh ab BIN_A BIN_B [--out DIR] [--rounds N] [-- BENCH_ARGS...]
#       two neural-frame binaries alternated A B A B ... (N rounds, default 3), each
#       `bench --size 960x540 --frames 200 --json-file`, then the medians per binary.
#
# BENCH_ARGS go to every `neural-frame bench` (e.g. -- --model models/upscale-fp16.onnx).
# The binary is $NEURAL_FRAME_BIN, else target/release/neural-frame. Logs, JSON and a
# summary go to DIR (default bench/out/<date>-<gpu name>). Exit code 0 when every step
# passed or was skipped, 1 when one failed, 2 for a usage error.
set -euo pipefail

usage() {
  awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "${BASH_SOURCE[0]}" >&2
  exit 2
}

# abspath PATH: PATH made absolute against the directory the suite was started from.
abspath() {
  case $1 in
    /*) printf '%s\n' "$1" ;;
    *) printf '%s/%s\n' "$PWD" "$1" ;;
  esac
}

# binpath BIN: a binary's absolute path; a bare name is looked up in PATH first.
binpath() {
  case $1 in
    */*) abspath "$1" ;;
    *) command -v -- "$1" || abspath "$1" ;;
  esac
}

[ $# -ge 1 ] || usage
mode=$1
shift
case $mode in
  quick | full | ab) ;;
  -h | --help | help) usage ;;
  *) echo "suite: unknown mode '$mode'" >&2; usage ;;
esac

out=""
rounds=3
bins=()
extra=()
while [ $# -gt 0 ]; do
  case $1 in
    --out) [ $# -ge 2 ] || usage; out=$(abspath "$2"); shift 2 ;;
    --out=*) out=$(abspath "${1#--out=}"); shift ;;
    --rounds) [ $# -ge 2 ] || usage; rounds=$2; shift 2 ;;
    --) shift; extra=("$@"); break ;;
    -*) echo "suite: unknown option '$1'" >&2; usage ;;
    *) bins+=("$(binpath "$1")"); shift ;;
  esac
done
if [ "$mode" = ab ]; then
  [ ${#bins[@]} -eq 2 ] || { echo "suite: ab needs two binaries" >&2; usage; }
  [[ $rounds =~ ^[1-9][0-9]*$ ]] || { echo "suite: --rounds needs a positive number" >&2; exit 2; }
else
  [ ${#bins[@]} -eq 0 ] || { echo "suite: $mode takes no binaries (NEURAL_FRAME_BIN picks one)" >&2; usage; }
fi

nf=""
if [ -n "${NEURAL_FRAME_BIN:-}" ]; then nf=$(binpath "$NEURAL_FRAME_BIN"); fi
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
nf=${nf:-$root/target/release/neural-frame}
if [ "$mode" = ab ]; then to_check=("${bins[@]}"); else to_check=("$nf"); fi
for b in "${to_check[@]}"; do
  [ -x "$b" ] || { echo "suite: no neural-frame binary at $b (build it: cargo build --release)" >&2; exit 2; }
done

# ONNX Runtime's CUDA provider finds the CUDA wheels scripts/setup.sh installed through this.
if [ -x scripts/runtime-env.sh ]; then
  eval "$(scripts/runtime-env.sh)"
fi

gpu="no-gpu"
smi=""
if command -v nvidia-smi >/dev/null 2>&1; then
  smi=$(nvidia-smi --query-gpu=name,driver_version,uuid --format=csv,noheader 2>/dev/null || true)
  if [ -n "$smi" ]; then
    gpu=${smi%%$'\n'*}
    gpu=${gpu%%,*}
    gpu=${gpu,,}
    gpu=${gpu#nvidia }
    gpu=${gpu//[^a-z0-9]/-}
    while [[ $gpu == *--* ]]; do gpu=${gpu//--/-}; done
    gpu=${gpu#-}
    gpu=${gpu%-}
  fi
fi
[ -n "$out" ] || out="$root/bench/out/$(date +%Y-%m-%d)-$gpu"
mkdir -p "$out"

{
  echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  echo "suite: $mode"
  echo "gpu (name, driver, uuid): ${smi:-none}"
  if git -C "$root" rev-parse --short HEAD >/dev/null 2>&1; then
    echo "commit: $(git -C "$root" rev-parse --short HEAD)$(git -C "$root" diff --quiet HEAD 2>/dev/null || echo ' (with changes)')"
  fi
  if [ "$mode" = ab ]; then
    echo "A: ${bins[0]} ($("${bins[0]}" --version 2>&1 || true))"
    echo "B: ${bins[1]} ($("${bins[1]}" --version 2>&1 || true))"
  else
    echo "binary: $nf ($("$nf" --version 2>&1 || true))"
  fi
} >"$out/env.txt"
cat "$out/env.txt"

failed=()
# step NAME CMD...: runs CMD with its output on the terminal and in DIR/NAME.log.
step() {
  local name=$1 rc
  shift
  printf '== %s: %s (%s)\n' "$name" "$*" "$(date +%T)" | tee "$out/$name.log"
  set +e
  "$@" 2>&1 | tee -a "$out/$name.log"
  rc=${PIPESTATUS[0]}
  set -e
  printf '== %s: rc=%s\n' "$name" "$rc" | tee -a "$out/$name.log"
  if [ "$rc" -ne 0 ]; then failed+=("$name"); fi
  return 0
}
skip() {
  printf '== %s: skipped (%s)\n' "$1" "$2" | tee "$out/$1.log"
}

have_python() {
  command -v python3 >/dev/null 2>&1 && python3 -c "import $1" >/dev/null 2>&1
}

# nf_bench BIN NAME ARGS...: `BIN bench ARGS BENCH_ARGS --json-file DIR/NAME.json`.
nf_bench() {
  local bin=$1 name=$2
  shift 2
  step "$name" "$bin" bench "$@" "${extra[@]}" --json-file "$out/$name.json"
}

# stream_y4m CHROMA: a y4m stream of 600 frames 960x540 through `neural-frame stream`.
stream_y4m() {
  python3 bench/y4m_source.py --size 960x540 --frames 600 --chroma "$1" | "$nf" stream --output /dev/null
}

# summary FILE...: one line per bench JSON.
summary() {
  command -v python3 >/dev/null 2>&1 || { echo "(no python3: no summary)"; return 0; }
  python3 - "$@" <<'PY'
import json, os, sys
def mode(r, name):
    return next((m for m in r.get("modes", []) if m["mode"] == name), None)
print(f"{'run':<24} {'backend':<8} {'ort-alone':>10} {'sync':>10} {'pipelined':>10} {'caller':>8} {'1st frame':>10}")
for f in sys.argv[1:]:
    try:
        r = json.load(open(f))
    except (OSError, ValueError) as e:
        print(f"{os.path.basename(f):<24} missing ({e})")
        continue
    a, s, p, c = (mode(r, n) for n in ("ort-alone", "zero-copy sync", "zero-copy pipelined", "caller frames"))
    ms = lambda m: f"{m['median_ms']:.3f} ms" if m else "-"
    share = lambda m: f"{100 * m['throughput_vs_ort']:.1f} %" if m else "-"
    ttff = r.get("time_to_first_frame_ms")
    print(f"{os.path.basename(f)[:-5]:<24} {r.get('backend', {}).get('backend', '?'):<8} {ms(a):>10} {ms(s):>10} "
          f"{share(p):>10} {share(c):>8} {f'{ttff / 1e3:.2f} s' if ttff else '-':>10}")
PY
}

# ab_summary: the medians over the rounds, per binary and mode.
ab_summary() {
  command -v python3 >/dev/null 2>&1 || { echo "(no python3: no summary)"; return 0; }
  python3 - "$out" "$rounds" <<'PY'
import json, statistics, sys
out, rounds = sys.argv[1], int(sys.argv[2])
modes = ("ort-alone", "zero-copy sync", "zero-copy pipelined")
med = {}
for b in "AB":
    for m in modes:
        vals = []
        for r in range(1, rounds + 1):
            try:
                rep = json.load(open(f"{out}/ab-{b}-{r}.json"))
                vals.append(next(x["median_ms"] for x in rep["modes"] if x["mode"] == m))
            except (OSError, ValueError, KeyError, StopIteration):
                pass
        med[b, m] = vals
print(f"{'mode':<20} {'A median':>10} {'B median':>10} {'B vs A':>8}   rounds A | B (ms)")
for m in modes:
    a, b = med["A", m], med["B", m]
    ma = statistics.median(a) if a else None
    mb = statistics.median(b) if b else None
    d = f"{100 * (mb - ma) / ma:+.1f} %" if ma and mb else "-"
    f = lambda v: f"{v:.3f}" if v is not None else "-"
    print(f"{m:<20} {f(ma):>10} {f(mb):>10} {d:>8}   {' '.join(f(v) for v in a)} | {' '.join(f(v) for v in b)}")
PY
}

case $mode in
  quick | full)
    step preflight "$nf" preflight
    nf_bench "$nf" bench-540p --size 960x540 --frames 200
    jsons=("$out/bench-540p.json")
    if [ "$mode" = full ]; then
      nf_bench "$nf" bench-1080p --size 1920x1080 --frames 100
      nf_bench "$nf" bench-540p-fp16 --model models/upscale-fp16.onnx --size 960x540 --frames 200
      jsons+=("$out/bench-1080p.json" "$out/bench-540p-fp16.json")
      if have_python numpy; then
        step stream-y4m-444 stream_y4m 444
        step stream-y4m-420 stream_y4m 420
      else
        skip stream-y4m "bench/y4m_source.py needs python3 with numpy"
      fi
      if command -v cargo >/dev/null 2>&1; then
        # The tests read a tune cache of their own, never the user's.
        step gpu-tests env NEURAL_FRAME_TUNE_CACHE="${NEURAL_FRAME_TUNE_CACHE:-$root/target/tests-tune-cache.json}" \
          cargo test --release -- --include-ignored --test-threads=1
      else
        skip gpu-tests "no cargo"
      fi
      if have_python torch; then
        weights="$out/upscale-weights.npz"
        if [ ! -e "$weights" ] && have_python onnx && have_python onnxruntime; then
          step torch-export python3 bench/torch_side.py export models/upscale.onnx "$weights"
        fi
        if [ -e "$weights" ]; then
          step torch-540p python3 bench/torch_side.py run "$weights" --size 960x540 --frames 200 \
            --json "$out/torch-540p.json"
          step torch-1080p python3 bench/torch_side.py run "$weights" --size 1920x1080 --frames 100 \
            --json "$out/torch-1080p.json"
        else
          skip torch "exporting the weights needs python3 with onnx and onnxruntime"
        fi
      else
        skip torch "python3 cannot import torch"
      fi
    fi
    summary "${jsons[@]}" | tee "$out/summary.txt"
    ;;
  ab)
    for r in $(seq "$rounds"); do
      nf_bench "${bins[0]}" "ab-A-$r" --size 960x540 --frames 200
      nf_bench "${bins[1]}" "ab-B-$r" --size 960x540 --frames 200
    done
    ab_summary | tee "$out/summary.txt"
    ;;
esac

echo "results in $out"
if [ ${#failed[@]} -gt 0 ]; then
  echo "failed: ${failed[*]}" >&2
  exit 1
fi
