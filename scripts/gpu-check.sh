#!/bin/bash
# gpu-check.sh: the CUDA decode engine's whole check on a GPU machine, in one
# call: compile the kernels to PTX and cubins (in parallel; $OUT/ptx-1.tar.gz
# to ptx-3.tar.gz hold the working tree's PTX and cubins, gzipped, with
# build-ptx.sh's manifest, to commit), the
# compiler's register/spill/stack report, the driver binding and kernel
# tests against their CPU twins, the engine against the CPU engine and
# package sample, and the decode benchmark on a generated SmolLM-135M-shaped
# Q4_0 model; with BENCH_CLI=1 also `gotok bench` on a `gotok gen` model
# (always with the PTX embedded in gotok). PTX=embedded skips the nvcc
# build and tests the PTX embedded in the test binary (the committed one).
#
# Build here first (no Go on the GPU machine), into the ignored .gpu:
#   bash scripts/gpu-build.sh    (with BENCH_CLI=1 also: CGO_ENABLED=0 go build -o .gpu/gotok ./cmd/gotok)
# then run scripts/gpu-check.sh there with .gpu's cu.test, cuda.test,
# kernels, stories260K.gguf, tokenizer.json and SOURCE carried (all of .gpu
# may pass the carry limit). TESTS (a -test.run pattern) narrows the
# engine tests; BENCH=0 skips the benchmark. GPU_DIR names another such
# directory (.gpu/pb, where there is no cu.test: those tests are skipped).
set -u -o pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
OUT=${OUT:-/tmp/gpu-check}
# At most 8 files come back from a call: $OUT gets the PTX (ptx-1..3),
# build.log (nvcc and ptxas) and tests.log; the rest stays in $W.
W=/tmp/gpu-check-work
rm -rf $W && mkdir -p $W
GPU_DIR=${GPU_DIR:-.gpu}
mkdir -p "$OUT"
status=0
# Binaries built from other sources than this tree's are refused
# (scripts/gpu-build.sh stamps them).
if [ -f "$GPU_DIR/SOURCE" ]; then
	tree=$(bash scripts/gpu-build.sh --hash)
	if [ "$(cat "$GPU_DIR/SOURCE")" != "$tree" ]; then
		echo "$GPU_DIR was built from other Go sources ($(cat "$GPU_DIR/SOURCE")) than this tree's ($tree): run scripts/gpu-build.sh"
		exit 1
	fi
else
	echo "warning: $GPU_DIR has no SOURCE stamp: built by hand, not by scripts/gpu-build.sh"
fi
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.max.sm --format=csv

if [ "${PTX:-}" = embedded ]; then
	echo "== no PTX build: the test binary and gotok run the PTX embedded in them"
else
	echo "== build PTX"
	NVCC=${NVCC:-/usr/local/cuda/bin/nvcc}
	# build_ptx SRC DST compiles every kernel of SRC into DST, in parallel, with
	# build-ptx.sh's flags and manifest.
	build_ptx() (
		mkdir -p "$2"
		cd "$1" || exit 1
		for f in *.cu; do
			op=${f%.cu}
			if head -n 1 "$f" | grep -q '^// target: sm_90a'; then # build-ptx.sh's rule
				"$NVCC" -ptx -O3 -std=c++17 -arch=compute_90a -o "$2/$op.sm90a.ptx" "$f" &
				"$NVCC" -cubin -O3 -std=c++17 -arch=sm_90a -o "$2/$op.sm90a.cubin" "$f" &
				continue
			fi
			"$NVCC" -ptx -O3 -std=c++17 -arch=compute_80 -o "$2/$op.sm80.ptx" "$f" &
			"$NVCC" -ptx -O3 -std=c++17 -arch=compute_90 -o "$2/$op.sm90.ptx" "$f" &
			"$NVCC" -cubin -O3 -std=c++17 -arch=sm_80 -o "$2/$op.sm80.cubin" "$f" &
			"$NVCC" -cubin -O3 -std=c++17 -arch=sm_90 -o "$2/$op.sm90.cubin" "$f" &
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
	rm -rf /tmp/ptx /tmp/ptx-run
	# One log for both builds: at most 8 files come back from the device.
	build_ptx "$root/$GPU_DIR/kernels" /tmp/ptx-run/ptx >"$OUT/build.log" 2>&1 || { echo "PTX build failed:"; head -40 "$OUT/build.log"; exit 1; }
	echo "== the working tree's kernels" >>"$OUT/build.log"
	if diff -rq --exclude=ptx "$root/$GPU_DIR/kernels" "$root/backend/cuda/kernels" >/dev/null; then
		mkdir -p /tmp/ptx && cp -r /tmp/ptx-run/ptx /tmp/ptx/ptx # the same sources: the same PTX
	else
		build_ptx "$root/backend/cuda/kernels" /tmp/ptx/ptx >>"$OUT/build.log" 2>&1 || { echo "working-tree PTX build failed:"; tail -20 "$OUT/build.log"; }
	fi
	gzip -9nf /tmp/ptx/ptx/*.ptx /tmp/ptx/ptx/*.cubin # as committed (build-ptx.sh)
	# In parts: a file back from the device is at most 16 MiB.
	(cd /tmp/ptx && tar czf "$OUT/ptx-1.tar.gz" ptx/gemm* && tar czf "$OUT/ptx-2.tar.gz" ptx/attention* &&
		tar czf "$OUT/ptx-3.tar.gz" --exclude='ptx/gemm*' --exclude='ptx/attention*' ptx)
	ptx=/tmp/ptx-run/ptx
	for f in "$ptx"/*.sm90.ptx; do
		/usr/local/cuda/bin/ptxas -arch=sm_90 -v "$f" -o /dev/null 2>&1 | grep -E "Compiling entry|registers|spill"
	done >"$W/ptxas.txt" 2>&1
	for f in "$ptx"/*.sm90a.ptx; do
		/usr/local/cuda/bin/ptxas -arch=sm_90a -v "$f" -o /dev/null 2>&1 | grep -E "Compiling entry|registers|spill|C75|warn"
	done >>"$W/ptxas.txt" 2>&1
	grep -E "Compiling|registers|spill" "$W/ptxas.txt" | paste - - - | sed -E 's/ptxas info *: //g' |
		grep -E "q4_0|q8_0|attention_|sample_chain|embed_q8" | grep -v prefill | cut -c1-220
	echo "kernels with spills or a stack frame:"
	grep -E "Compiling|spill" "$W/ptxas.txt" | paste - - | grep -vE "0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads" | cut -c1-200
	export GOTOK_CUDA_PTX_DIR="$ptx"
fi

echo "== driver binding tests"
if [ -x "$root/$GPU_DIR/cu.test" ]; then
	(cd backend/cuda/cu && "$root/$GPU_DIR/cu.test" -test.v -test.timeout 120s) >"$W/cu-test.log" 2>&1 || status=1
	grep -E "^(--- |ok|FAIL|PASS)|µs each|device:" "$W/cu-test.log"
else
	echo "no $GPU_DIR/cu.test: skipped"
fi

echo "== kernel and engine tests"
(cd backend/cuda && GOTOK_STORIES260K="$root/$GPU_DIR/stories260K.gguf" \
	"$root/$GPU_DIR/cuda.test" -test.v -test.timeout 400s -test.run "${TESTS:-.}") >"$W/cuda-test.log" 2>&1 || status=1
grep -E "^(--- |ok|FAIL|PASS|panic)|worst|identical|agree|exact|relative error [0-9.e+-]+ >|device token|want|diverge" "$W/cuda-test.log" |
	grep -vE "^    --- PASS" | head -100

if [ "${BENCH:-1}" = 1 ]; then
echo "== decode benchmark, prefill vs token-by-token on the benchmark model, prefill speed"
(cd backend/cuda && GOTOK_BENCH_MODEL="${GOTOK_BENCH_MODEL:-smollm-135m}" \
	"$root/$GPU_DIR/cuda.test" -test.v -test.timeout 400s -test.run "TestDecodeSpeed|TestPrefillBenchModel|TestPrefillSpeed") 2>&1 | tee "$W/bench.log" |
	grep -E "tok/s|kernels|relative|FAIL|ok|panic|cuda \(|profile|  [a-z_0-9]+ +[0-9]+×|sum|worst|first token|^--- " || status=1
fi

if [ "${NCU:-0}" = 1 ]; then
	echo "== ncu: each decode kernel alone (SmolLM-135M shapes, positions 100 and 2148)"
	ncu=$(command -v ncu || ls /usr/local/cuda/bin/ncu /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -n 1)
	(cd backend/cuda && GOTOK_NCU=1 "$ncu" --clock-control none --csv \
		--metrics gpu__time_duration.sum,launch__shared_mem_config_size,launch__registers_per_thread \
		"$root/$GPU_DIR/cuda.test" -test.run TestKernelDurations) >"$W/ncu.csv" 2>"$W/ncu.err" || status=1
	python3 - "$W/ncu.csv" <<'PY'
import csv, sys
rows = [l for l in open(sys.argv[1]) if l.startswith('"')]
k = {}
for r in csv.DictReader(rows):
    d = k.setdefault(int(r["ID"]), {"name": r["Kernel Name"].split("(")[0], "grid": r["Grid Size"]})
    d[r["Metric Name"]] = r["Metric Value"]
for i in sorted(k):
    d = k[i]
    print("%3d %-18s grid %-14s %8s ns  smem config %s  regs %s" % (i, d["name"], d["grid"], d.get("gpu__time_duration.sum"),
          d.get("launch__shared_mem_config_size"), d.get("launch__registers_per_thread")))
PY
	(cd backend/cuda && GOTOK_NCU=1 "$ncu" --clock-control none -k regex:"attention|ffn" -c 3 --section WarpStateStats \
		--section SchedulerStats "$root/$GPU_DIR/cuda.test" -test.run TestKernelDurations) >"$W/ncu-stalls.txt" 2>&1
	grep -E "^  [a-z_0-9]+\(|Warp Cycles Per Issued|Active Warps Per|each warp of this workload spends" "$W/ncu-stalls.txt" | head -24
fi

if [ "${BENCH_CLI:-0}" = 1 ]; then
	echo "== gotok bench"
	model=/tmp/smollm-135m-q4_0.gguf
	$GPU_DIR/gotok gen -o "$model" --preset smollm-135m --tokenizer $GPU_DIR/tokenizer.json >/dev/null || exit 1
	# The preset's context is 2048 tokens: the deepest tg128 starts at 1920.
	(unset GOTOK_CUDA_PTX_DIR
	$GPU_DIR/gotok bench -m "$model" --device cuda -p 512 -n 128 -r 5 &&
		$GPU_DIR/gotok bench -m "$model" --device cuda -p 0 -n 128 -d 1920 -r 5) 2>&1 | tee "$OUT/gotok-bench.txt" || status=1
fi
cat $W/cu-test.log $W/cuda-test.log $W/bench.log >"$OUT/tests.log" 2>/dev/null
[ -f $W/ptxas.txt ] && cat $W/ptxas.txt >>"$OUT/build.log"
[ -f $W/ncu.csv ] && cp $W/ncu.csv $W/ncu-stalls.txt "$OUT/"
exit $status
