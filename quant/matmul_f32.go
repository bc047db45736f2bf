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
// it needs no horizontal sums; rows past a multiple of 4 take a one-row
// kernel and 8 columns past a multiple of 16 an 8-column one (the same
// bits), and only the last n mod 8 columns, or everything without AVX2,
// the Go code.
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
	m4, n16, n8 := 0, 0, 0
	if useAVX2 {
		m4, n16, n8 = m&^3, n&^15, n&^7
	}
	acc := 0
	if accumulate {
		acc = 1
	}
	if n16 > 0 {
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
		// The rows past a multiple of four one at a time, with the same
		// bits as in a tile (a decode token's two or three query heads of
		// a KV head were the generic loop's, the f16 cache's widening a
		// call each).
		for r := m4; r < m; r++ {
			switch b := any(b).(type) {
			case []float32:
				matMulF32RowAVX2(&a[r*lda], lda, &b[0], ldb, k, &c[r*ldc], ldc, n16/16, acc)
			case []uint16:
				matMulF32F16RowAVX2(&a[r*lda], lda, &b[0], ldb, k, &c[r*ldc], ldc, n16/16, acc)
			}
		}
	}
	if n8 > n16 {
		// Eight columns more (a value product over a head dimension of 8
		// is nothing else), the same way.
		for r := 0; r < m; r++ {
			tile := r < m4 // rows r..r+3 in one call
			switch b := any(b).(type) {
			case []float32:
				if tile {
					matMulF32Col8AVX2(&a[r*lda], lda, &b[n16], ldb, k, &c[r*ldc+n16], ldc, 1, acc)
				} else {
					matMulF32RowCol8AVX2(&a[r*lda], lda, &b[n16], ldb, k, &c[r*ldc+n16], ldc, 1, acc)
				}
			case []uint16:
				if tile {
					matMulF32F16Col8AVX2(&a[r*lda], lda, &b[n16], ldb, k, &c[r*ldc+n16], ldc, 1, acc)
				} else {
					matMulF32F16RowCol8AVX2(&a[r*lda], lda, &b[n16], ldb, k, &c[r*ldc+n16], ldc, 1, acc)
				}
			}
			if tile {
				r += 3
			}
		}
	}
	done := 0 // the rows whose first n8 columns the kernels took
	if n8 > 0 {
		done = m
	}
	if done > 0 && n8 < n { // the columns right of the tiles, for the kernels' rows
		matMulF32Generic(done, n-n8, k, a, lda, b[n8:], ldb, c[n8:], ldc, accumulate)
	}
	if done < m {
		matMulF32Generic(m-done, n, k, a[done*lda:], lda, b, ldb, c[done*ldc:], ldc, accumulate)
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
	if bh, half := any(b).([]uint16); half {
		matMulF32F16Generic(m, n, k, a, lda, bh, ldb, c, ldc, accumulate)
		return
	}
	bf := any(b).([]float32)
	for i := 0; i < m; i++ {
		ci := c[i*ldc : i*ldc+n]
		if !accumulate {
			clear(ci)
		}
		for l := 0; l < k; l++ {
			axpyGeneric(a[i*lda+l], bf[l*ldb:l*ldb+n], ci)
		}
	}
}

// matMulF32F16Generic is matMulF32Generic with B in float16: each row of
// B widened once (64 columns at a time, by VCVTPH2PS where there is AVX2)
// for every row of A, the same sums in the same order. (A decode token's
// products over a head dimension below 16 come here: stories260K's 8.)
func matMulF32F16Generic(m, n, k int, a []float32, lda int, b []uint16, ldb int, c []float32, ldc int, accumulate bool) {
	if !accumulate {
		for i := 0; i < m; i++ {
			clear(c[i*ldc : i*ldc+n])
		}
	}
	var wide [64]float32
	for l := 0; l < k; l++ {
		row := b[l*ldb : l*ldb+n]
		for j0 := 0; j0 < n; j0 += len(wide) {
			w := wide[:min(len(wide), n-j0)]
			j := 0
			if useAVX2 && len(w) >= 8 {
				j = len(w) &^ 7
				widenF16AVX2(&row[j0], &w[0], j)
			}
			for ; j < len(w); j++ {
				w[j] = F16ToF32(row[j0+j])
			}
			for i := 0; i < m; i++ {
				axpyGeneric(a[i*lda+l], w, c[i*ldc+j0:i*ldc+j0+len(w)])
			}
		}
	}
}
