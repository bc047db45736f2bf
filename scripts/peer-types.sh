#!/bin/bash
# peer-types.sh: many weight types of one shape beside llama.cpp in one
# device call (../shared/anchors/peer-bench.sh's loop, arranged for the
# time limit of a call): llama.cpp builds in the background while gotok
# writes the f16 files (the 8B one is 16 GB) and, optionally, times synth
# models (SYNTH: cuda.test TestDecodeSpeed specs, e.g.
# "llama-8b/4:mix-iq4_xs"); then for each PRESET and TYPE llama-quantize
# makes the file, `gotok bench` and `llama-bench -fa 1` run on it, and a
# row of ratios goes to $OUT/peer.txt. Quantized 8B files are deleted
# after their row (disk).
#
# Here (no Go on the GPU machine; ../shared does not travel; gotok with a
# minimal embedded PTX set, since the full binary and the tarball pass the
# 64 MiB carry limit, and GOTOK_CUDA_PTX_DIR pointing at the committed PTX
# of the working tree instead):
#   PB=1 bash scripts/gpu-build.sh
# Device, carry [".gpu/pb"]:
#   PRESETS=llama-8b TYPES="Q4_K_M IQ4_XS Q3_K_M" TESTS="-p 512 -n 128 -r 2" bash scripts/peer-types.sh
# .gpu/pb's SOURCE stamp must match the tree's Go sources.
#
# BESIDE, a command, runs in the background from the start (GPU tests while
# llama.cpp builds), with its own $OUT ($OUT/beside) and BESIDE_TESTS as
# its TESTS (TESTS here is the benches' flags), and is waited for before
# the first timing. PEER_PTX names the PTX gotok runs (default: the
# tree's committed PTX). Kernels changed in the tree, tested and timed in
# one call:
#   BESIDE='GPU_DIR=.gpu/pb bash scripts/gpu-check.sh' BESIDE_TESTS='TestGemmKernels/^BF16$' \
#   PEER_PTX=/tmp/ptx-run/ptx PRESETS=llama-8b TYPES=BF16 bash scripts/peer-types.sh
# At most 8 files come back from a call: the benches' scratch stays in
# /tmp/peer-work; $OUT gets peer.txt, beside.txt and what BESIDE writes.
#
# Budget: llama.cpp's build ~3.5 min alone (~6 with gpu-check.sh's PTX
# build beside it); at 8B ~1.5 min a type after it (three or four types a
# call), at 1B ~20 s (every type in one call).
set -u
R=$(cd "$(dirname "$0")/.." && pwd)
G=${G:-$R/.gpu/pb}
OUT=${OUT:-/tmp/peer}
W=/tmp/peer-work
mkdir -p "$OUT" $W
if [ -f "$G/SOURCE" ] && [ "$(cat "$G/SOURCE")" != "$(bash "$R/scripts/gpu-build.sh" --hash)" ]; then
	echo "$G was built from other Go sources than this tree's: run PB=1 scripts/gpu-build.sh"
	exit 1
fi
PRESETS=${PRESETS:-llama-1b}
TYPES=${TYPES:-Q4_K_M}
TESTS=${TESTS:-"-p 512 -n 128 -r 2"}
export PATH=/usr/local/cuda/bin:$PATH GOTOK_CUDA_PTX_DIR=${PEER_PTX:-$R/backend/cuda/kernels/ptx}
LL=/tmp/llama.cpp
T0=$(date +%s)
el() { echo $(($(date +%s) - T0)); }
if [ ! -x $LL/build/bin/llama-bench ]; then
	(mkdir -p /tmp/llsrc && tar xzf "$G"/llama.cpp-*.tgz -C /tmp/llsrc && rm -rf $LL && mv /tmp/llsrc/* $LL &&
		cmake -S $LL -B $LL/build -G Ninja -DGGML_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 -DLLAMA_CURL=OFF \
			-DLLAMA_OPENSSL=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_SERVER=OFF \
			-DCMAKE_BUILD_TYPE=Release >"$W/llama-build.log" 2>&1 &&
		cmake --build $LL/build -j 16 --target llama-bench llama-quantize >>"$W/llama-build.log" 2>&1) &
	BUILD=$!
fi
if [ -n "${BESIDE:-}" ]; then
	mkdir -p "$OUT/beside"
	TESTS="${BESIDE_TESTS:-}" OUT="$OUT/beside" bash -c "$BESIDE" >"$OUT/beside.txt" 2>&1 &
	BESIDE_PID=$!
fi
for p in $PRESETS; do
	[ -f /tmp/$p-f16.gguf ] || "$G/gotok" gen -o /tmp/$p-f16.gguf --preset $p --type f16 --tokenizer "$G/tokenizer.json" >/dev/null 2>&1 ||
		echo "$p: gotok gen failed"
done
for s in ${SYNTH:-}; do
	echo "== synth $s @$(el)s" >>"$OUT/synth.txt"
	(cd "$R/backend/cuda" && GOTOK_BENCH_QUICK=1 GOTOK_BENCH_MODEL=$s timeout 120 "$G/cuda.test" -test.v -test.run 'TestDecodeSpeed$' 2>&1 |
		grep -E "replay|profile|  [a-z_0-9]+ +[0-9]+×|FAIL|panic") >>"$OUT/synth.txt"
done
if [ -n "${BUILD:-}" ]; then
	wait $BUILD || { echo "llama.cpp build failed:"; tail -20 "$W/llama-build.log"; exit 1; }
fi
echo "llama.cpp ready @$(el)s"
if [ -n "${BESIDE_PID:-}" ]; then
	wait $BESIDE_PID
	echo "beside: exit $? @$(el)s"
fi
L=$LL/build/bin
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
for p in $PRESETS; do
	f16=/tmp/$p-f16.gguf
	for typ in $TYPES; do
		m=/tmp/$p-$typ.gguf
		case $typ in
		F16 | f16) m=$f16 ;;
		*) [ -f $m ] || "$L/llama-quantize" $f16 $m $typ 16 >/dev/null 2>&1 || { echo "$p $typ: llama-quantize failed"; continue; } ;;
		esac
		rm -f $W/gotok.* $W/llama.*
		"$G/gotok" bench -m $m --device cuda $TESTS --json >"$W/gotok.json" 2>"$W/gotok.err" || echo "$p $typ: gotok: $(tail -2 "$W/gotok.err")"
		"$L/llama-bench" -m $m -ngl 99 -fa 1 $TESTS -o json >"$W/llama.json" 2>"$W/llama.err" || echo "$p $typ: llama-bench: $(tail -1 "$W/llama.err")"
		python3 - "$p:$typ" "$W/gotok.json" "$W/llama.json" <<'PY' | tee -a "$OUT/peer.txt"
import json, sys
def rows(f):
    try:
        return {(r.get("n_prompt", 0), r.get("n_gen", 0), r.get("n_depth", 0)): float(r["avg_ts"]) for r in json.load(open(f))}
    except Exception:
        return {}
g, l = rows(sys.argv[2]), rows(sys.argv[3])
for k in sorted(set(g) | set(l)):
    name = (f"pp{k[0]}" if k[1] == 0 else f"tg{k[1]}") + (f"@d{k[2]}" if k[2] else "")
    a, b = g.get(k), l.get(k)
    print(f"{sys.argv[1]:18s} {name:8s} {a or 0:10.1f} {b or 0:10.1f} {(a / b if a and b else 0):6.2f}x")
PY
		[ "$p" = llama-8b ] && [ "$m" != "$f16" ] && rm -f $m
		echo "   @$(el)s" >>"$OUT/peer.txt"
	done
done
cat "$OUT/synth.txt" 2>/dev/null
