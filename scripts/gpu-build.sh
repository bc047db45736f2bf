#!/bin/bash
# gpu-build.sh: build here (no Go on the GPU machine) what the device
# scripts carry, from the working tree, and stamp each set with the hash
# of the Go sources it was built from (SOURCE), which gpu-check.sh and
# peer-types.sh check on the device: a binary older than the tree it runs
# beside is refused there instead of timing or testing stale code.
#
#   bash scripts/gpu-build.sh        # .gpu: cu.test, cuda.test, kernels, test files (gpu-check.sh)
#   PB=1 bash scripts/gpu-build.sh   # .gpu/pb too: gotok and cuda.test with one PTX module embedded
#                                    # (GOTOK_CUDA_PTX_DIR supplies the rest), llama.cpp's source
#                                    # (peer-types.sh; carry [".gpu/pb"], small enough beside the tree)
#   SB=1 bash scripts/gpu-build.sh   # .gpu/sb: gotok and loadgen as PB's, gzipped, and llama.cpp's
#                                    # source (serve-bench.sh; carry [".gpu/sb"])
set -eu
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
shared=${SHARED:-$root/../shared}
# The hash: every Go file and the module files, in a fixed order.
hash=$(find . -path ./.git -prune -o -path ./.gpu -prune -o \( -name '*.go' -o -name go.mod -o -name go.sum \) -print |
	LC_ALL=C sort | xargs sha256sum | sha256sum | cut -c1-16)
if [ "${1:-}" = --hash ]; then
	echo "$hash"
	exit 0
fi
mkdir -p .gpu
cp -f "$shared/models/stories260K.gguf" "$shared/tokenizer-tests/smollm2-135m-instruct/tokenizer.json" .gpu/
CGO_ENABLED=0 go test -c -ldflags="-s -w" -o .gpu/cu.test ./backend/cuda/cu
CGO_ENABLED=0 go test -c -ldflags="-s -w" -o .gpu/cuda.test ./backend/cuda
rm -rf .gpu/kernels && cp -r backend/cuda/kernels .gpu/kernels && rm -rf .gpu/kernels/ptx
echo "$hash" >.gpu/SOURCE
# small_tree copies the tree without the PTX but dequant's sm80 module (an
# embedded set must not be empty) to $tmp, so that binaries built there
# stay small.
small_tree() {
	tmp=$(mktemp -d)
	trap 'rm -rf "$tmp"' EXIT
	tar cf - --exclude=./.git --exclude=./.gpu . | tar xf - -C "$tmp"
	find "$tmp/backend/cuda/kernels/ptx" -name '*.gz' ! -name 'dequant.sm80.*' -delete
}
if [ "${SB:-0}" = 1 ]; then
	small_tree
	rm -rf .gpu/sb && mkdir -p .gpu/sb
	(cd "$tmp" && CGO_ENABLED=0 go build -ldflags="-s -w" -o "$root/.gpu/sb/gotok" ./cmd/gotok &&
		CGO_ENABLED=0 go build -ldflags="-s -w" -o "$root/.gpu/sb/loadgen" ./cmd/loadgen)
	gzip -9 .gpu/sb/gotok .gpu/sb/loadgen
	cp -f "$shared"/anchors/llama.cpp-*.tgz "$shared/tokenizer-tests/smollm2-135m-instruct/tokenizer.json" .gpu/sb/
	echo "$hash" >.gpu/sb/SOURCE
	du -sh .gpu/sb
	exit 0
fi
if [ "${PB:-0}" = 1 ]; then
	small_tree
	mkdir -p .gpu/pb
	(cd "$tmp" && CGO_ENABLED=0 go build -ldflags="-s -w" -o "$root/.gpu/pb/gotok" ./cmd/gotok &&
		CGO_ENABLED=0 go test -c -ldflags="-s -w" -o "$root/.gpu/pb/cuda.test" ./backend/cuda)
	cp -f "$shared"/anchors/llama.cpp-*.tgz "$shared/tokenizer-tests/smollm2-135m-instruct/tokenizer.json" \
		"$shared/models/stories260K.gguf" .gpu/pb/
	rm -rf .gpu/pb/kernels && cp -r .gpu/kernels .gpu/pb/kernels
	echo "$hash" >.gpu/pb/SOURCE
fi
du -sh .gpu/cuda.test .gpu/pb 2>/dev/null
