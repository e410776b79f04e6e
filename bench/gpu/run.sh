#!/usr/bin/env bash
# The GPU check, run from the repository root on a bare, offline GPU machine (Python 3.12,
# torch with CUDA, transformers, peft, typer, rich and g++; see docs/gpu.md), in at most 8
# minutes:
#
#     bench/gpu/run.sh              # everything
#     bench/gpu/run.sh --dry-run    # install and build, then stop before the first CUDA call
#     GPU_CHECK_STEPS=tests,kernel bench/gpu/run.sh    # only these measuring steps
#
# It installs the wheels carried in .whl/ (filled by bench/gpu/fetch_wheels.sh) that the
# machine lacks, installs the project editable and builds its native core, checks the GPU
# (one line; without one it stops there with one error line), runs the gpu-marked tests, the
# kernel benchmark (Qwen2.5-1.5B shape at random init, bf16: eager, static, CUDA graphs, CUDA
# graphs with the fused Triton kernels, and compiled), the step's profile (its kernels by
# kind, each matrix product's rate alone, the token choice's floors), the start-up
# measurement (graphs and --compile, cold and warm), the 7B kernel benchmark and the rewrite
# benchmark (graphs, fused kernels, --compile, eager) as time allows, and a summary against
# the targets. Results go to $OUT, or bench/results/ when OUT is unset: gpu-summary.{md,json},
# gpu-steps.tsv, gpu-check.json, gpu-tests.xml, gpu-kernel-{1.5b,7b}.{json,md},
# gpu-profile.{json,md}, gpu-startup.{json,md}, gpu-rewrite-*.{json,md}, and every step's
# output in gpu-check.log (the end of a failed step's output is also printed). A step that
# would overrun the time left is cut short or skipped, and the summary says so.
# GPU_CHECK_STEPS picks measuring steps from tests, kernel, profile, startup, kernel-7b,
# rewrite and peers (default: all but peers), so a short device lease can run the check in
# parts; peers is cad beside transformers (generate with a static cache, compiled, and with
# prompt lookup) on three HEvalFix edits, into gpu-peers.{json,md} (vLLM cannot travel to the
# machine: its wheel is larger than what may be carried).
set -uo pipefail
cd "$(dirname "$0")/../.."

PYTHON="${PYTHON:-python3}"
RESULTS="${OUT:-bench/results}"
BUDGET="${GPU_CHECK_SECONDS:-465}"
STEPS_WANTED=",${GPU_CHECK_STEPS:-tests,kernel,profile,startup,kernel-7b,rewrite},"
MODEL=qwen2.5-1.5b
DRY_RUN=0
case "${1:-}" in
  --dry-run) DRY_RUN=1 ;;
  "") ;;
  *) echo "usage: bench/gpu/run.sh [--dry-run]" >&2; exit 64 ;;
esac

mkdir -p "$RESULTS"
LOG="$RESULTS/gpu-check.log"
STEPS="$RESULTS/gpu-steps.tsv"
: >"$LOG"
: >"$STEPS"
CACHES="$(mktemp -d "${TMPDIR:-/tmp}/cad-gpu-check.XXXXXX")"
export CAD_CACHE_DIR="$CACHES/cad" TORCHINDUCTOR_CACHE_DIR="$CACHES/inductor"
export TRITON_CACHE_DIR="$CACHES/triton" HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1
export PYTHONUNBUFFERED=1 CAD_BUILD_JOBS="$(nproc 2>/dev/null || echo 4)"
FAILED=0

# run_step NAME LIMIT MINIMUM COMMAND...: run COMMAND for at most LIMIT seconds (fewer when
# less of the budget is left), or skip it when fewer than MINIMUM seconds are left; its output
# goes to the log, its outcome to gpu-steps.tsv and one line to the terminal.
run_step() {
  local name=$1 limit=$2 minimum=$3
  shift 3
  local remaining=$((BUDGET - SECONDS))
  if [ "$remaining" -lt "$minimum" ]; then
    printf '%s\tskipped: %ss left\t0\n' "$name" "$remaining" >>"$STEPS"
    echo "$name: skipped, ${remaining}s left"
    return 0
  fi
  [ "$limit" -gt "$remaining" ] && limit=$remaining
  local began=$SECONDS status word output
  output="$(mktemp "${TMPDIR:-/tmp}/cad-gpu-step.XXXXXX")"
  echo "== $name: $*" >>"$LOG"
  timeout --kill-after=10 "$limit" "$@" >"$output" 2>&1
  status=$?
  cat "$output" >>"$LOG"
  case $status in
    0) word=ok ;;
    124 | 137) word="cut at ${limit}s" ;;
    *) word="failed ($status)" ;;
  esac
  printf '%s\t%s\t%s\n' "$name" "$word" "$((SECONDS - began))" >>"$STEPS"
  echo "$name: $word in $((SECONDS - began))s"
  if [ "$status" -ne 0 ]; then
    FAILED=1
    tail -n 25 "$output" | sed 's/^/    /'
  fi
  rm -f "$output"
  return "$status"
}

# wanted NAME: whether GPU_CHECK_STEPS asks for the measuring step NAME.
wanted() {
  [[ "$STEPS_WANTED" == *",$1,"* ]]
}

# stop MESSAGE: the one line a fatal step ends the check with.
stop() {
  echo "error: $1 (see $LOG)" >&2
  exit 1
}

run_step wheels 120 0 "$PYTHON" bench/gpu/install_wheels.py .whl ||
  stop "the carried wheels did not install"
run_step project 240 0 "$PYTHON" -m pip install --no-index --no-deps --no-build-isolation -e . ||
  stop "the project (and its native core) did not install"
run_step imports 60 0 "$PYTHON" -c "import cad.grammar._native, cad.selector, bench.kernel" ||
  stop "the installed project does not import"

if [ "$DRY_RUN" -eq 1 ]; then
  echo "dry run: installed and built; next: the GPU check, gpu tests, kernel, start-up and rewrite benchmarks into $RESULTS"
  exit 0
fi

if ! "$PYTHON" -m bench.gpu.check --out-json "$RESULTS/gpu-check.json" 2>>"$LOG"; then
  printf 'check\tno CUDA device\t0\n' >>"$STEPS"
  tail -n 1 "$LOG" >&2
  exit 2
fi
printf 'check\tok\t0\n' >>"$STEPS"

wanted tests && run_step gpu-tests 120 30 "$PYTHON" -m pytest -m gpu -q -p no:cacheprovider \
  tests/selector --junitxml="$RESULTS/gpu-tests.xml"
wanted kernel && run_step kernel-1.5b 220 60 "$PYTHON" -m bench.kernel --model "$MODEL" \
  --device cuda --dtype bfloat16 --prefix 1024 --spans 8,32,128 --trials 3 \
  --runtimes eager,static,graphs,kernels,compiled --edits 2 \
  --out-json "$RESULTS/gpu-kernel-1.5b.json" --out-md "$RESULTS/gpu-kernel-1.5b.md"
wanted profile && run_step profile 120 60 "$PYTHON" -m bench.gpu.profile --model "$MODEL" \
  --dtype bfloat16 --out-json "$RESULTS/gpu-profile.json" --out-md "$RESULTS/gpu-profile.md"
wanted startup && run_step startup 150 60 "$PYTHON" -m bench.gpu.startup --model "$MODEL" \
  --dtype bfloat16 --out-json "$RESULTS/gpu-startup.json" --out-md "$RESULTS/gpu-startup.md"
wanted kernel-7b && run_step kernel-7b 100 70 "$PYTHON" -m bench.kernel --model qwen2.5-7b \
  --device cuda --dtype bfloat16 --prefix 1024 --spans 8,32 --trials 3 --runtimes eager,graphs,kernels \
  --out-json "$RESULTS/gpu-kernel-7b.json" --out-md "$RESULTS/gpu-kernel-7b.md"
if wanted rewrite; then
  for runtime in graphs kernels compile eager; do
    case $runtime in
      graphs) options=(--limit 3) ;;
      kernels) options=(--limit 3 --triton) ;;
      compile) options=(--limit 3 --compile) ;;
      eager) options=(--limit 1 --no-graphs) ;;
    esac
    run_step "rewrite-$runtime" 60 30 "$PYTHON" -m bench.rewrite --model "$MODEL" \
      --device cuda --dtype bfloat16 --corpus heval-python --split test "${options[@]}" \
      --out-json "$RESULTS/gpu-rewrite-$runtime.json" --out-md "$RESULTS/gpu-rewrite-$runtime.md"
  done
fi
wanted peers && run_step peers 240 120 "$PYTHON" -m bench.peers --model "$MODEL" --device cuda \
  --dtype bfloat16 --methods cad,transformers --corpus heval-python --split test --limit 3 \
  --out-json "$RESULTS/gpu-peers.json" --out-md "$RESULTS/gpu-peers.md"
"$PYTHON" -m bench.gpu.report "$RESULTS" >>"$LOG" 2>&1 || FAILED=1
rm -rf "$CACHES"
cat "$RESULTS/gpu-summary.md" 2>/dev/null
echo "summary: $RESULTS/gpu-summary.md ($((SECONDS))s)"
exit "$FAILED"
