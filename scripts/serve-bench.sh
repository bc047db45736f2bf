#!/bin/bash
# serve-bench.sh: gotok's server beside llama-server under one load
# generator (cmd/loadgen), on the same files, in one device call (issue
# 16's measure). llama.cpp (server, quantizer, batched bench) builds in the
# background while gotok writes the f16 files; then for each MODEL
# (PRESET:TYPE, TYPE by llama-quantize as peer-bench.sh makes it) loadgen
# serves gotok in-process (-m, the server package on loopback HTTP) and
# loads llama-server (-url) with the same prompts, and
# llama-batched-bench gives llama.cpp's engine alone.
#
# Here:    SB=1 bash scripts/gpu-build.sh
# Device, carry [".gpu/sb"]:
#   MODELS="smollm-135m:Q4_0 llama-1b:Q4_K_M" STREAMS=1,8,32,64 bash scripts/serve-bench.sh
# PEER_PTX names the PTX gotok runs (default: the tree's committed PTX).
# GOTOK_ONLY=1 skips llama.cpp (no build: `gotok quantize` makes the files,
# whose mixes are llama-quantize's) for a quick look at gotok alone.
# $OUT gets serve.txt (every table) and the build log on failure.
set -u
R=$(cd "$(dirname "$0")/.." && pwd)
G=$R/.gpu/sb
OUT=${OUT:-/tmp/serve}
W=/tmp/serve-work
mkdir -p "$OUT" $W
if [ "$(cat "$G/SOURCE")" != "$(bash "$R/scripts/gpu-build.sh" --hash)" ]; then
	echo "$G was built from other Go sources than this tree's: run SB=1 scripts/gpu-build.sh"
	exit 1
fi
MODELS=${MODELS:-"smollm-135m:Q4_0 llama-1b:Q4_K_M"}
STREAMS=${STREAMS:-1,8,32,64}
N=${N:-256}
REQUESTS=${REQUESTS:-64}
# A ~130-token prompt with the chat template around it.
PROMPT=${PROMPT:-"Write a long story for children about a small red fox who lives at the edge of a quiet forest, a river that sings at night, and an old owl who teaches the fox to count the stars. The fox is curious and brave but sometimes forgets to listen. One winter the river freezes and the animals of the forest cannot find water. The fox, the owl and a shy rabbit set out together to find the source of the river high in the mountains. Describe the journey, the weather, the friends they meet, the mistakes they make and what they learn, and end with the spring."}
export PATH=/usr/local/cuda/bin:$PATH GOTOK_CUDA_PTX_DIR=${PEER_PTX:-$R/backend/cuda/kernels/ptx}
T0=$(date +%s)
el() { echo $(($(date +%s) - T0)); }
gzip -dc "$G/gotok.gz" >$W/gotok && gzip -dc "$G/loadgen.gz" >$W/loadgen && chmod +x $W/gotok $W/loadgen
LL=/tmp/llama.cpp
if [ "${GOTOK_ONLY:-0}" != 1 ] && [ ! -x $LL/build/bin/llama-server ]; then
	(mkdir -p /tmp/llsrc && tar xzf "$G"/llama.cpp-*.tgz -C /tmp/llsrc && rm -rf $LL && mv /tmp/llsrc/* $LL &&
		cmake -S $LL -B $LL/build -G Ninja -DGGML_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 -DLLAMA_CURL=OFF \
			-DLLAMA_OPENSSL=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_SERVER=ON \
			-DCMAKE_BUILD_TYPE=Release >"$W/llama-build.log" 2>&1 &&
		cmake --build $LL/build -j 16 --target llama-server llama-quantize llama-batched-bench >>"$W/llama-build.log" 2>&1) &
	BUILD=$!
fi
for spec in $MODELS; do
	preset=${spec%%:*}
	[ -f /tmp/$preset-f16.gguf ] || $W/gotok gen -o /tmp/$preset-f16.gguf --preset "$preset" --type f16 \
		--tokenizer "$G/tokenizer.json" >/dev/null || echo "$spec: gotok gen failed"
done
echo "f16 files at $(el) s"
if [ -n "${BUILD:-}" ] && ! wait $BUILD; then
	echo "llama.cpp build failed"
	tail -30 $W/llama-build.log | tee "$OUT/llama-build.log"
	exit 1
fi
echo "llama.cpp built at $(el) s"
L=$LL/build/bin
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
# wait_up waits for a server's /health (at most 120 s).
wait_up() {
	for _ in $(seq 240); do
		python3 -c 'import sys, urllib.request; urllib.request.urlopen(sys.argv[1] + "/health", timeout=2)' "$1" \
			>/dev/null 2>&1 && return 0
		sleep 0.5
	done
	return 1
}
for spec in $MODELS; do
	preset=${spec%%:*} typ=${spec#*:}
	m=/tmp/$preset-$typ.gguf
	quantize() { $L/llama-quantize /tmp/$preset-f16.gguf "$m" "$typ" 16; }
	[ "${GOTOK_ONLY:-0}" = 1 ] && quantize() { $W/gotok quantize /tmp/$preset-f16.gguf "$m" --type "$typ"; }
	case $typ in f16 | F16) m=/tmp/$preset-f16.gguf ;; *) [ -f "$m" ] || quantize >/dev/null 2>&1 || {
		echo "$spec: quantize failed"
		continue
	} ;; esac
	echo "== $spec: gotok (loadgen -m, in-process server), $(el) s"
	$W/loadgen -m "$m" -device cuda -ctx 1024 -streams "$STREAMS" -n "$N" -requests "$REQUESTS" -p "$PROMPT" 2>&1
	[ "${GOTOK_ONLY:-0}" = 1 ] && continue
	echo "== $spec: llama-server -np 64 -c 65536 -fa on, $(el) s"
	$L/llama-server -m "$m" -np 64 -c 65536 -ngl 99 -fa on --port 18081 >$W/llama-server.log 2>&1 &
	LS=$!
	if wait_up http://127.0.0.1:18081; then
		$W/loadgen -url http://127.0.0.1:18081 -streams "$STREAMS" -n "$N" -requests "$REQUESTS" -p "$PROMPT" 2>&1
	else
		echo "llama-server did not come up"
		tail -5 $W/llama-server.log
	fi
	kill $LS
	wait $LS 2>/dev/null
	if [ "${BATCHED:-1}" = 1 ]; then
		echo "== $spec: llama-batched-bench, $(el) s"
		$L/llama-batched-bench -m "$m" -c 25000 -b 2048 -ub 512 -npp 128 -ntg 256 -npl 1,8,32,64 -ngl 99 -fa on 2>/dev/null |
			grep -E "^\|" || echo "llama-batched-bench failed"
	fi
done 2>&1 | tee "$OUT/serve.txt"
echo "done at $(el) s"
