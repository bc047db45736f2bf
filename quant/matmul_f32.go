package quant

import "fmt"

// MatMulF32 computes the m×n matrix product C = A·B of float32 matrices
// stored row by row at strides lda, ldb and ldc (A is m×k, B is k×n),
// setting c[i*ldc+j] to Σ_l a[i*lda+l]·b[l*ldb+j], or adding it there
// when accumulate is true. Other elements of c are left untouched.
//
// It is meant for attention, where both products are small and strided:
// scores = Q·Kᵀ with the keys stored transposed, and output = P·V. The
// AVX2 kernel computes 4×16 tiles of C in registers, loading each row
// segment of B once per four rows of A and broadcasting elements of A, so
// it needs no horizontal sums; rows past a multiple of 4 and columns past
// a multiple of 16 take the Go code, so callers that want speed pad m and
// n (or at least m).
func MatMulF32(m, n, k int, a []float32, lda int, b []float32, ldb int, c []float32, ldc int, accumulate bool) {
	matMulF32(m, n, k, a, lda, b, ldb, c, ldc, accumulate)
}

// MatMulF32F16 is MatMulF32 with B in float16 (IEEE half bits): the
// attention products over an f16 KV cache, each value widened as it is
// loaded.
func MatMulF32F16(m, n, k int, a []float32, lda int, b []uint16, ldb int, c []float32, ldc int, accumulate bool) {
	matMulF32(m, n, k, a, lda, b, ldb, c, ldc, accumulate)
}

func matMulF32[B float32 | uint16](m, n, k int, a []float32, lda int, b []B, ldb int, c []float32, ldc int, accumulate bool) {
	checkMatMulF32(m, n, k, len(a), lda, len(b), ldb, len(c), ldc)
	if m == 0 || n == 0 {
		return
	}
	if k == 0 {
		if !accumulate {
			for i := 0; i < m; i++ {
				clear(c[i*ldc : i*ldc+n])
			}
		}
		return
	}
	m4, n16 := 0, 0
	if useAVX2 {
		m4, n16 = m&^3, n&^15
	}
	if n16 > 0 {
		acc := 0
		if accumulate {
			acc = 1
		}
		n32 := 0
		if useAVX512 {
			// Tiles of 32 columns on ZMM registers, the last 16 on YMM.
			n32 = n16 &^ 31
		}
		// Rows 8 at a time on ZMM registers where there are 8 (each load
		// of B feeds twice the FMAs), else 4.
		for i := 0; i < m4; {
			rows := 4
			if n32 > 0 && i+8 <= m4 {
				rows = 8
			}
			switch b := any(b).(type) {
			case []float32:
				switch {
				case rows == 8:
					matMulF32x8AVX512(&a[i*lda], lda, &b[0], ldb, k, &c[i*ldc], ldc, n32/32, acc)
				case n32 > 0:
					matMulF32AVX512(&a[i*lda], lda, &b[0], ldb, k, &c[i*ldc], ldc, n32/32, acc)
				}
				for r := i; r < i+rows && n16 > n32; r += 4 {
					matMulF32AVX2(&a[r*lda], lda, &b[n32], ldb, k, &c[r*ldc+n32], ldc, (n16-n32)/16, acc)
				}
			case []uint16:
				switch {
				case rows == 8:
					matMulF32F16x8AVX512(&a[i*lda], lda, &b[0], ldb, k, &c[i*ldc], ldc, n32/32, acc)
				case n32 > 0:
					matMulF32F16AVX512(&a[i*lda], lda, &b[0], ldb, k, &c[i*ldc], ldc, n32/32, acc)
				}
				for r := i; r < i+rows && n16 > n32; r += 4 {
					matMulF32F16AVX2(&a[r*lda], lda, &b[n32], ldb, k, &c[r*ldc+n32], ldc, (n16-n32)/16, acc)
				}
			}
			i += rows
		}
	} else {
		m4 = 0
	}
	if n16 < n { // the columns right of the tiles, for the tiled rows
		matMulF32Generic(m4, n-n16, k, a, lda, b[n16:], ldb, c[n16:], ldc, accumulate)
	}
	if m4 < m {
		matMulF32Generic(m-m4, n, k, a[m4*lda:], lda, b, ldb, c[m4*ldc:], ldc, accumulate)
	}
}

func checkMatMulF32(m, n, k, alen, lda, blen, ldb, clen, ldc int) {
	if m < 0 || n < 0 || k < 0 {
		panic(fmt.Sprintf("quant: MatMulF32: negative size %d×%d×%d", m, n, k))
	}
	check := func(name string, length, rows, cols, stride int) {
		if rows == 0 || cols == 0 {
			return
		}
		if rows > 1 && stride < cols {
			panic(fmt.Sprintf("quant: MatMulF32: %s stride %d is less than %d columns", name, stride, cols))
		}
		if need := (rows-1)*stride + cols; length < need {
			panic(fmt.Sprintf("quant: MatMulF32: %s has %d floats, %d rows of %d at stride %d need %d", name, length, rows, cols, stride, need))
		}
	}
	check("a", alen, m, k, lda)
	check("b", blen, k, n, ldb)
	check("c", clen, m, n, ldc)
}

func matMulF32Generic[B float32 | uint16](m, n, k int, a []float32, lda int, b []B, ldb int, c []float32, ldc int, accumulate bool) {
	bf, _ := any(b).([]float32)
	bh, half := any(b).([]uint16)
	for i := 0; i < m; i++ {
		ci := c[i*ldc : i*ldc+n]
		if !accumulate {
			clear(ci)
		}
		for l := 0; l < k; l++ {
			ai := a[i*lda+l]
			if half { // widened as it is read
				for j, h := range bh[l*ldb : l*ldb+n] {
					ci[j] += ai * F16ToF32(h)
				}
				continue
			}
			axpyGeneric(ai, bf[l*ldb:l*ldb+n], ci)
		}
	}
}
