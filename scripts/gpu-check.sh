#!/bin/bash
# gpu-check.sh: the CUDA backend's whole check on a GPU machine, in one call:
# compile the kernels to PTX (brought back in $OUT/ptx.tar.gz to commit), the
# compiler's register/spill report, the driver binding and kernel tests
# against their CPU twins, the engine against the CPU engine, and the decode
# benchmark on a generated SmolLM-135M-shaped Q4_0 model.
#
# Build here first (no Go on the GPU machine):
#   mkdir -p .gpu && cp ../shared/models/stories260K.gguf .gpu/
#   CGO_ENABLED=0 go test -c -o .gpu/cu.test ./backend/cuda/cu
#   CGO_ENABLED=0 go test -c -o .gpu/cuda.test ./backend/cuda
# then run scripts/gpu-check.sh there with .gpu carried.
set -u -o pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
OUT=${OUT:-/tmp/gpu-check}
mkdir -p "$OUT"
status=0
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.max.sm --format=csv

echo "== build PTX"
scripts/build-ptx.sh || exit 1
tar czf "$OUT/ptx.tar.gz" -C backend/cuda/kernels ptx
for f in backend/cuda/kernels/ptx/*.sm90.ptx; do
	/usr/local/cuda/bin/ptxas -arch=sm_90 -v "$f" -o /dev/null 2>&1 | grep -E "Compiling entry|registers|spill"
done >"$OUT/ptxas.txt" 2>&1
grep -B1 -E "[1-9][0-9]* bytes spill" "$OUT/ptxas.txt" | head -20
export GOTOK_CUDA_PTX_DIR="$root/backend/cuda/kernels/ptx"

echo "== driver binding tests"
(cd backend/cuda/cu && "$root/.gpu/cu.test" -test.v -test.timeout 120s) >"$OUT/cu-test.log" 2>&1 || status=1
grep -E "^(--- |ok|FAIL|PASS)|µs each|device:" "$OUT/cu-test.log"

echo "== kernel and engine tests"
(cd backend/cuda && GOTOK_STORIES260K="$root/.gpu/stories260K.gguf" \
	"$root/.gpu/cuda.test" -test.v -test.timeout 300s) >"$OUT/cuda-test.log" 2>&1 || status=1
grep -E "^(--- |ok|FAIL|PASS|panic)|worst|identical|agree|relative error [0-9.e+-]+ >" "$OUT/cuda-test.log" | head -80

echo "== decode benchmark"
model=${GOTOK_BENCH_MODEL:-smollm-135m}
(cd backend/cuda && GOTOK_BENCH_MODEL="$model" \
	"$root/.gpu/cuda.test" -test.v -test.timeout 300s -test.run TestDecodeSpeed) 2>&1 | tee "$OUT/bench.log" |
	grep -E "tok/s|kernels|relative|FAIL|ok|panic|cuda \(" || status=1
exit $status
