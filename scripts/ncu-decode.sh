#!/bin/bash
# ncu-decode.sh: Nsight Compute's view of some decode kernels of one model,
# on the GPU machine: the kernels whose names match KERNELS (an ncu regex,
# e.g. "logits_x8|matvec_add8") in the decode graphs TestDecodeSpeed
# replays for GOTOK_BENCH_MODEL (a synth spec such as
# "llama-8b/4:mix-q6_k"), with their time, memory throughput, occupancy,
# registers and the warps' stall reasons. The whole report goes to
# $OUT/ncu-decode.txt, a summary to stdout.
#
# Build here first (no Go on the GPU machine), into the ignored .gpu:
#   CGO_ENABLED=0 go test -c -ldflags="-s -w" -o .gpu/cuda.test ./backend/cuda
# then, carrying .gpu/cuda.test:
#   KERNELS="logits_x8" GOTOK_BENCH_MODEL=llama-8b/4:mix-q6_k bash scripts/ncu-decode.sh
# GOTOK_CUDA_PTX_DIR, when set, runs other kernels than the embedded ones.
set -u -o pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
OUT=${OUT:-/tmp/ncu-decode}
mkdir -p "$OUT"
KERNELS=${KERNELS:?set KERNELS to an ncu kernel-name regex}
: "${GOTOK_BENCH_MODEL:?set GOTOK_BENCH_MODEL to a synth spec}"
ncu=$(command -v ncu || ls /usr/local/cuda/bin/ncu /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -n 1)
[ -n "$ncu" ] || {
	echo "ncu not found"
	exit 1
}
# -c: a few launches of each matching kernel are enough (the graphs replay
# them thousands of times); --clock-control none keeps the clocks the
# benchmark runs at.
(cd "$root/backend/cuda" && GOTOK_BENCH_QUICK=1 "$ncu" --clock-control none -k "regex:$KERNELS" -c "${COUNT:-4}" \
	--section SpeedOfLight --section MemoryWorkloadAnalysis --section Occupancy --section LaunchStats \
	--section WarpStateStats --section SchedulerStats \
	"$root/.gpu/cuda.test" -test.run 'TestDecodeSpeed$') >"$OUT/ncu-decode.txt" 2>&1
status=$?
grep -E "^  [a-z_0-9]+\(|Duration|Memory Throughput|DRAM Throughput|Achieved Occupancy|Theoretical Occupancy|Registers Per|Block Limit|Warp Cycles Per Issued|Issued Warp Per|No Eligible|each warp of this workload spends|stall" \
	"$OUT/ncu-decode.txt" | head -120
exit $status
