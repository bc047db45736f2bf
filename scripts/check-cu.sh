#!/bin/sh
# check-cu.sh: type-check the CUDA kernels with clang on a machine without the
# CUDA SDK (apt-get install clang). It catches syntax and template errors
# before a GPU run; scripts/build-ptx.sh (nvcc, on a GPU machine) makes the PTX.
set -eu
cd "$(dirname "$0")/../backend/cuda/kernels"
CLANG=${CLANG:-$(command -v clang++ || command -v clang++-14 || command -v clang-14)}
status=0
for f in *.cu; do
	for arch in sm_80; do
		"$CLANG" -x cuda --cuda-device-only -nocudainc -nocudalib --cuda-gpu-arch=$arch \
			-std=c++17 -fsyntax-only -Wall -Wno-unknown-cuda-version "$f" || status=1
	done
	# The sm_90 paths (clusters, PDL): clang 14 knows no sm_90, so
	# pretend on sm_86.
	"$CLANG" -x cuda --cuda-device-only -nocudainc -nocudalib --cuda-gpu-arch=sm_86 -Wno-macro-redefined \
		-D__CUDA_ARCH__=900 -std=c++17 -fsyntax-only -Wall -Wno-unknown-cuda-version "$f" || status=1
done
exit $status
