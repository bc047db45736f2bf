#!/bin/sh
# build-ptx.sh: compile backend/cuda/kernels/*.cu to PTX and to machine code
# with nvcc (on a GPU machine: nvcc is not needed anywhere else), gzipped as
# the kernels package embeds them, and write the manifest of source hashes
# that the kernels package's test checks. Output goes to
# backend/cuda/kernels/ptx/, or to $1 when given.
#
#   compute_80: runs on Ampere and every newer GPU (the driver JITs it)
#   compute_90: Hopper and newer; adds programmatic dependent launch
#   sm_80, sm_90 cubins: loaded without JIT on 8.x and 9.0 devices
#
# A source whose first line is "// target: sm_90a" (Hopper's wgmma) is
# built for compute_90a and sm_90a alone, as OP.sm90a.ptx and .cubin.
set -eu
NVCC=${NVCC:-/usr/local/cuda/bin/nvcc}
cd "$(dirname "$0")/../backend/cuda/kernels"
out=${1:-ptx}
mkdir -p "$out"
for f in *.cu; do
	op=${f%.cu}
	if head -n 1 "$f" | grep -q '^// target: sm_90a'; then
		"$NVCC" -ptx -O3 -std=c++17 -arch=compute_90a -o "$out/$op.sm90a.ptx" "$f"
		"$NVCC" -cubin -O3 -std=c++17 -arch=sm_90a -o "$out/$op.sm90a.cubin" "$f"
		continue
	fi
	"$NVCC" -ptx -O3 -std=c++17 -arch=compute_80 -o "$out/$op.sm80.ptx" "$f"
	"$NVCC" -ptx -O3 -std=c++17 -arch=compute_90 -o "$out/$op.sm90.ptx" "$f"
	"$NVCC" -cubin -O3 -std=c++17 -arch=sm_80 -o "$out/$op.sm80.cubin" "$f"
	"$NVCC" -cubin -O3 -std=c++17 -arch=sm_90 -o "$out/$op.sm90.cubin" "$f"
done
gzip -9nf "$out"/*.ptx "$out"/*.cubin
{
	echo "# sha256 of the kernel sources; $("$NVCC" --version | tail -n 2 | head -n 1)"
	sha256sum *.cu *.cuh
} >"$out/manifest.txt"
echo "built $(ls "$out"/*.ptx.gz | wc -l) PTX files and $(ls "$out"/*.cubin.gz | wc -l) cubins in $out"
