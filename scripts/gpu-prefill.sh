#!/bin/bash
# gpu-prefill.sh: the batched prefill's check on a GPU machine, in one call:
# compile every kernel to PTX (in parallel; $OUT/ptx.tar.gz holds the result
# with build-ptx.sh's manifest, to commit), the compiler's register and spill
# report for the prefill kernels, the CUDA package's tests (the prefill
# kernels against their CPU twins, prefill against token-by-token decoding,
# and the decode engine's own tests), then on a `gotok gen` SmolLM-135M Q4_0
# model: prefill vs decode logits at 1..2000 tokens, prefill timings with a
# per-kernel profile, `gotok bench -p 128,512,2048` and `gotok run` on a
# ~512-token prompt (time to first token).
#
# Build here first (no Go on the GPU machine), into an ignored folder:
#   d=.gpu-prefill; mkdir -p $d && cp ../shared/models/stories260K.gguf $d/
#   cp ../shared/tokenizer-tests/smollm2-135m-instruct/tokenizer.json $d/
#   CGO_ENABLED=0 go build -o $d/gotok ./cmd/gotok
#   CGO_ENABLED=0 go test -c -o $d/cuda.test ./backend/cuda
#   cp -r backend/cuda/kernels $d/kernels   # the sources those were built with
# then run GPU_DIR=$d scripts/gpu-prefill.sh there with $d carried (the
# folder must be ignored: add /.gpu-prefill/ to .git/info/exclude). When
# $d's binaries come from a snapshot of another tree (say HEAD plus the
# prefill files, while the decode kernels are being rewritten), a test
# binary of the working tree in $d/wt/cuda.test also runs the prefill tests
# on the working tree's kernels.
set -u -o pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
OUT=${OUT:-/tmp/gpu-prefill}
mkdir -p "$OUT"
status=0
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.max.sm --format=csv

echo "== build PTX"
NVCC=${NVCC:-/usr/local/cuda/bin/nvcc}
# build_ptx SRC DST compiles every kernel of SRC into DST, in parallel, with
# build-ptx.sh's flags and manifest.
build_ptx() (
	mkdir -p "$2"
	cd "$1" || exit 1
	for f in *.cu; do
		op=${f%.cu}
		"$NVCC" -ptx -O3 -std=c++17 -arch=compute_80 -o "$2/$op.sm80.ptx" "$f" &
		"$NVCC" -ptx -O3 -std=c++17 -arch=compute_90 -o "$2/$op.sm90.ptx" "$f" &
	done
	fail=0
	for job in $(jobs -p); do wait "$job" || fail=1; done
	{
		echo "# sha256 of the kernel sources; $("$NVCC" --version | tail -n 2 | head -n 1)"
		sha256sum *.cu *.cuh
	} >"$2/manifest.txt"
	cp ptx/README "$2/" 2>/dev/null
	exit $fail
)
# The tests run the kernels in $GPU_DIR/kernels (the sources the test binary
# was built with); the working tree's kernels are built too, for the commit.
GPU_DIR=${GPU_DIR:-.gpu-prefill}
rm -rf /tmp/ptx /tmp/ptx-run
build_ptx "$root/$GPU_DIR/kernels" /tmp/ptx-run/ptx >"$OUT/build-run.log" 2>&1 || { echo "PTX build failed:"; head -40 "$OUT/build-run.log"; exit 1; }
build_ptx "$root/backend/cuda/kernels" /tmp/ptx/ptx >"$OUT/build.log" 2>&1 || { echo "working-tree PTX build failed:"; head -20 "$OUT/build.log"; }
tar czf "$OUT/ptx.tar.gz" -C /tmp/ptx ptx
ptx=/tmp/ptx-run/ptx
for f in "$ptx"/gemm.sm90.ptx "$ptx"/prefill_*.sm90.ptx; do
	/usr/local/cuda/bin/ptxas -arch=sm_90 -v "$f" -o /dev/null 2>&1 | grep -E "Compiling entry|registers|spill"
done >"$OUT/ptxas.txt" 2>&1
grep -E "Compiling|registers|spill" "$OUT/ptxas.txt" | paste - - - | sed -E 's/ptxas info *: //g' | cut -c1-200
export GOTOK_CUDA_PTX_DIR="$ptx"

echo "== tests"
(cd backend/cuda && GOTOK_STORIES260K="$root/$GPU_DIR/stories260K.gguf" \
	"$root/$GPU_DIR/cuda.test" -test.v -test.timeout 400s) >"$OUT/cuda-test.log" 2>&1 || status=1
grep -E "^(--- |ok|FAIL|PASS|panic)|relative error [0-9.e+-]+ >|prompt of|agree|identical|guard|bound|sampled" "$OUT/cuda-test.log" |
	grep -vE "^    --- PASS|: relative error [0-9.e+-]+ \(bound" | head -90

echo "== SmolLM-135M Q4_0"
model=/tmp/smollm-135m-q4_0.gguf
$GPU_DIR/gotok gen -o "$model" --preset smollm-135m --tokenizer $GPU_DIR/tokenizer.json || exit 1
(cd backend/cuda && GOTOK_BENCH_MODEL="$model" "$root/$GPU_DIR/cuda.test" -test.v -test.timeout 300s \
	-test.run 'TestPrefillBenchModel|TestPrefillSpeed') >"$OUT/bench-test.log" 2>&1 || status=1
grep -E "^(--- |ok|FAIL|panic)|prompt of|pp[0-9]|profile|  [a-z_0-9]+ +[0-9]+×|cuda \(" "$OUT/bench-test.log"

echo "== gotok bench"
$GPU_DIR/gotok bench -m "$model" --device cuda -p 128,512,2048 -n 128 -r 5 2>&1 | tee "$OUT/bench.txt" || status=1

if [ -x "$GPU_DIR/wt/cuda.test" ]; then
	# A test binary of another tree (the working tree, when $GPU_DIR's
	# kernels are a consistent snapshot): the prefill tests on its kernels.
	echo "== prefill tests on the working tree's kernels"
	(cd backend/cuda && GOTOK_CUDA_PTX_DIR=/tmp/ptx/ptx GOTOK_BENCH_MODEL="$model" GOTOK_STORIES260K="$root/$GPU_DIR/stories260K.gguf" \
		"$root/$GPU_DIR/wt/cuda.test" -test.v -test.timeout 300s -test.run 'Prefill|Gemm') >"$OUT/wt-test.log" 2>&1 || status=1
	grep -E "^(--- |ok|FAIL|PASS|panic)|relative error [0-9.e+-]+ >|prompt of 2000|agree|identical|PDL up" "$OUT/wt-test.log" | grep -v "^    --- PASS"
fi

echo "== gotok run, ~512-token prompt"
for i in $(seq 1 46); do printf 'The quick brown fox jumps over the lazy dog near the river bank. '; done >/tmp/prompt.txt
$GPU_DIR/gotok run -m "$model" --device cuda -f /tmp/prompt.txt -n 8 --temp 0 2>&1 >/dev/null | tail -5 || status=1
exit $status
