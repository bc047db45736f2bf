#!/bin/bash
# gpu-race.sh: the evidence that the CUDA engine gives the same right
# answers every time, on a GPU machine in one call:
#   1. the GPU test suites (driver binding, kernels and engine, and the
#      root package's golden continuations) COUNT times in a row
#      (-test.count), each failure listed;
#   2. compute-sanitizer's memcheck, racecheck and synccheck (SANITIZE_TOOLS)
#      over the decode, run-ahead and prefill tests (SANITIZE_RUN, a
#      -test.run pattern; SANITIZE=0 skips it), with the stress test
#      shortened to SANITIZE_OPS operations. racecheck runs the kernels
#      ~100× slower: give it a narrower SANITIZE_RUN.
# COUNT=0 skips step 1; SUITES names the suites of step 1 (default: cu
# cuda gotok), so that one device call of at most 10 minutes can run the
# long engine suite 20 times alone.
# Build here first (no Go on the GPU machine), into the ignored .gpu,
# compressed so that it fits the device tool's transfer:
#   mkdir -p .gpu/shared/models/arch
#   cp ../shared/models/stories260K.gguf .gpu/shared/models/
#   cp ../shared/models/arch/{llama3.gguf,golden.jsonl} .gpu/shared/models/arch/
#   CGO_ENABLED=0 go test -c -o .gpu/cu.test ./backend/cuda/cu
#   CGO_ENABLED=0 go test -c -o .gpu/cuda.test ./backend/cuda
#   CGO_ENABLED=0 go test -c -o .gpu/gotok.test .
#   gzip -f .gpu/*.test .gpu/shared/models/*.gguf .gpu/shared/models/arch/*.gguf
# then run scripts/gpu-race.sh there with .gpu carried. TESTS narrows the
# engine tests (a -test.run pattern).
set -u -o pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
OUT=${OUT:-/tmp/gpu-race}
GPU_DIR=$root/${GPU_DIR:-.gpu}
COUNT=${COUNT:-20}
mkdir -p "$OUT"
find "$GPU_DIR" -name '*.gz' -exec gunzip -f {} +
chmod +x "$GPU_DIR"/*.test
status=0
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
export GOTOK_SHARED=$GPU_DIR/shared GOTOK_STORIES260K=$GPU_DIR/shared/models/stories260K.gguf

# suite NAME DIR BINARY ARGS...: runs a test binary from DIR, counts passes
# and failures of each test.
suite() {
	local name=$1 dir=$2 bin=$3
	shift 3
	local start=$SECONDS
	(cd "$dir" && "$bin" -test.v -test.count "$COUNT" "$@") >"$OUT/$name.log" 2>&1 || status=1
	echo "$name: $((SECONDS - start)) s; runs passed $(grep -c '^--- PASS' "$OUT/$name.log"), failed $(grep -c '^--- FAIL' "$OUT/$name.log"), skipped $(grep -c '^--- SKIP' "$OUT/$name.log")"
	grep -E "^--- FAIL|^panic|^FAIL" "$OUT/$name.log" | sort | uniq -c | head -20
	grep -E -A3 "^--- FAIL" "$OUT/$name.log" | grep -vE "^--- |^--$" | head -20
}

if [ "$COUNT" -gt 0 ]; then
	echo "== the GPU suites, $COUNT times in a row"
	for s in ${SUITES:-cu cuda gotok}; do
		case $s in
		cu) suite cu backend/cuda/cu "$GPU_DIR/cu.test" -test.timeout 600s ;;
		cuda) suite cuda backend/cuda "$GPU_DIR/cuda.test" -test.timeout 3000s -test.run "${TESTS:-.}" ;;
		gotok) suite gotok . "$GPU_DIR/gotok.test" -test.timeout 600s -test.run 'TestArch|Stories|Generate' ;;
		*) echo "unknown suite $s"; status=1 ;;
		esac
	done
	cat "$OUT"/cuda.log "$OUT"/gotok.log 2>/dev/null | grep -E "operations map|near-tie" | sort | uniq -c | head -12
fi

if [ "${SANITIZE:-1}" = 1 ]; then
	cs=$(command -v compute-sanitizer || ls /usr/local/cuda/bin/compute-sanitizer 2>/dev/null)
	run=${SANITIZE_RUN:-"TestDecodeRunAhead|TestSampledRunAhead|TestPrefillMatchesSteps|TestEngineMatchesCPU|TestInterleavedOpsMatchCPU|TestPrefillSampled|TestDecodeRepeatable"}
	for tool in ${SANITIZE_TOOLS:-memcheck racecheck synccheck}; do
		start=$SECONDS
		(cd backend/cuda && GOTOK_STRESS_OPS=${SANITIZE_OPS:-300} "$cs" --tool "$tool" --error-exitcode 9 \
			"$GPU_DIR/cuda.test" -test.v -test.timeout 1200s -test.run "$run") >"$OUT/sanitize-$tool.log" 2>&1
		rc=$?
		[ $rc = 0 ] || status=1
		echo "compute-sanitizer --tool $tool: exit $rc, $((SECONDS - start)) s; $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$OUT/sanitize-$tool.log" | tail -1)"
		grep -E "^--- (PASS|FAIL)" "$OUT/sanitize-$tool.log" | sort | uniq -c
		grep -E "^========= (Invalid|Race|Barrier|Error|Program hit)" "$OUT/sanitize-$tool.log" | sort | uniq -c | head -10
	done
fi
exit $status
