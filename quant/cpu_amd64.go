//go:build amd64 && !purego

package quant

// cpuid executes CPUID with the given leaf and sub-leaf.
func cpuid(leaf, subleaf uint32) (eax, ebx, ecx, edx uint32)

// xgetbv reads extended control register 0.
func xgetbv() (eax, edx uint32)

// hasAVX2FMA reports whether the CPU has AVX2, FMA and F16C and the OS
// saves the YMM registers, which is what the assembly kernels need. It
// reads CPUID directly so the package needs no golang.org/x/sys.
func hasAVX2FMA() bool {
	maxLeaf, _, _, _ := cpuid(0, 0)
	if maxLeaf < 7 {
		return false
	}
	_, _, ecx1, _ := cpuid(1, 0)
	const (
		fma     = 1 << 12
		osxsave = 1 << 27
		avx     = 1 << 28
		f16c    = 1 << 29
	)
	if ecx1&(fma|osxsave|avx|f16c) != fma|osxsave|avx|f16c {
		return false
	}
	if xcr0, _ := xgetbv(); xcr0&6 != 6 { // XMM and YMM state enabled
		return false
	}
	_, ebx7, _, _ := cpuid(7, 0)
	return ebx7&(1<<5) != 0 // AVX2
}

// hasAVX512VNNI reports whether the CPU has AVX512-VNNI, AVX512VL (for
// VPDPBUSD on YMM registers) and AVX512BW (byte shuffles and masks on ZMM
// registers, in the MatMul pack functions) and the OS saves the AVX-512
// state, which EVEX encodings need even at 256 bits.
func hasAVX512VNNI() bool {
	maxLeaf, _, _, _ := cpuid(0, 0)
	if maxLeaf < 7 {
		return false
	}
	if xcr0, _ := xgetbv(); xcr0&0xe6 != 0xe6 { // XMM, YMM, opmask, ZMM state
		return false
	}
	_, ebx7, ecx7, _ := cpuid(7, 0)
	const (
		avx512f  = 1 << 16 // EBX
		avx512bw = 1 << 30 // EBX
		avx512vl = 1 << 31 // EBX
		vnni     = 1 << 11 // ECX
	)
	return ebx7&(avx512f|avx512bw|avx512vl) == avx512f|avx512bw|avx512vl && ecx7&vnni != 0
}

// hasAVX512F reports whether the CPU has AVX512F and AVX512VL (EVEX
// encodings of YMM and XMM operations, for the registers above 15) and the
// OS saves the AVX-512 state: what the ZMM float kernels need.
func hasAVX512F() bool {
	maxLeaf, _, _, _ := cpuid(0, 0)
	if maxLeaf < 7 {
		return false
	}
	if xcr0, _ := xgetbv(); xcr0&0xe6 != 0xe6 { // XMM, YMM, opmask, ZMM state
		return false
	}
	_, ebx7, _, _ := cpuid(7, 0)
	const (
		avx512f  = 1 << 16
		avx512vl = 1 << 31
	)
	return ebx7&(avx512f|avx512vl) == avx512f|avx512vl
}

// hasAVX512BF16 reports whether the CPU has AVX512_BF16 (VDPBF16PS), with
// hasAVX512F's conditions.
func hasAVX512BF16() bool {
	if !hasAVX512F() {
		return false
	}
	maxSub, _, _, _ := cpuid(7, 0)
	if maxSub < 1 {
		return false
	}
	eax71, _, _, _ := cpuid(7, 1)
	return eax71&(1<<5) != 0
}
