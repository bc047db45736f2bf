package quant

import (
	"encoding/binary"
	"fmt"
	"math"
	"unsafe"
)

// Matrix–matrix products for batched prefill.
//
// A MatVec kernel reads each weight block once per token; a prompt of T
// tokens should read it once per T. The assembly MatMul kernels therefore
// work on a row group (16 rows with AVX512-VNNI, 8 with AVX2) at a time:
//
//  1. The group's weights are unpacked and transposed into a stack buffer,
//     block by block, so that one vector register holds dword k (4 codes)
//     of the block for every row of the group, and another the rows'
//     float32 scales.
//  2. For each token, dword k of its activation block is broadcast to all
//     lanes and multiplied into the weight register with one VPDPBUSD (or
//     VPMADDUBSW with AVX2). After the block's 8 dwords each lane holds the
//     block's integer dot product for its row: there is no horizontal sum,
//     and the int→float conversion and scaling cost three instructions per
//     block and row group instead of per block and row.
//
// The weight codes enter the integer product unsigned (Q4_0's nibble q, or
// Q8_0's code + 128 and IQ4_NL's table value + 128 with VNNI), so the
// product is off by a multiple of the activation block's code sum:
// Σ(q−8)·y = Σq·y − 8·Σy. A per-call table holds each activation block's
// correction −m·Σy and fp16 scale as float32, laid out so that a tile of
// tokens finds its entries side by side. For the types with a min (Q4_1,
// Q5_1: d·q + m) the unsigned codes q are the product as they are, and the
// table holds d(x)·Σy instead, which the kernel multiplies by each row's m.
//
// The transposed weights are reused by every token of the batch and the
// table by every row group, so both cost a few percent of the products.
// The activations themselves are read in place. Both buffers live on the
// stack (about 70 KB); long rows are split into chunks of
// matMulChunkBlocks blocks whose partial products are added into out, and
// long prompts into chunks of tokens that fit the table. Go calls the
// kernels once per row group, a few microseconds of work each.

const (
	matMulChunkBlocks = 64
	matMulPackBytes   = matMulChunkBlocks * packBlockBytesMax
	matMulSumEntries  = 4096 // 8 bytes each: scale, correction
	packBlockBytesMax = 10 * 64
)

// matMulPath selects a MatMul implementation; tests force each in turn.
type matMulPath int

const (
	matMulGenericPath matMulPath = iota
	matMulAVX2Path
	matMulVNNIPath
)

func bestMatMulPath() matMulPath {
	switch {
	case useVNNI:
		return matMulVNNIPath
	case useAVX2:
		return matMulAVX2Path
	}
	return matMulGenericPath
}

// MatMulQ4_0Q8_0 sets out[t*outStride+r] to the dot product of row r of w
// with token t of x, for r < rows and t < tokens. w holds rows rows of
// nblocks Q4_0 blocks back to back, x holds tokens rows of nblocks Q8_0
// blocks back to back. It is the batched-prefill form of MatVecQ4_0Q8_0:
// each weight block is loaded once for all the tokens, and each activation
// block once per group of 16 rows. Out cells other than those it sets are left
// untouched, so to split the work across threads give each a range of
// rows: w[r0*rowBytes:], rows r1−r0, out[r0:]. Results equal DotQ4_0Q8_0
// up to float32 summation order.
func MatMulQ4_0Q8_0(w []byte, nblocks, rows int, x []byte, tokens int, out []float32, outStride int) {
	checkMatMul("MatMulQ4_0Q8_0", len(w), q4_0Bytes, nblocks, rows, len(x), tokens, len(out), outStride)
	matMul(Q4_0, bestMatMulPath(), w, nblocks, rows, x, tokens, out, outStride)
}

// MatMulQ8_0Q8_0 is MatMulQ4_0Q8_0 for Q8_0 weights.
func MatMulQ8_0Q8_0(w []byte, nblocks, rows int, x []byte, tokens int, out []float32, outStride int) {
	checkMatMul("MatMulQ8_0Q8_0", len(w), q8_0Bytes, nblocks, rows, len(x), tokens, len(out), outStride)
	matMul(Q8_0, bestMatMulPath(), w, nblocks, rows, x, tokens, out, outStride)
}

// MatMulRowsQ8_0 is MatMulQ4_0Q8_0 for weights of type t: Q4_1, Q5_0,
// Q5_1 or IQ4_NL (the batched form of MatVecRowsQ8_0), or Q4_0 or Q8_0.
func MatMulRowsQ8_0(t Type, w []byte, nblocks, rows int, x []byte, tokens int, out []float32, outStride int) {
	switch t {
	case Q4_0, Q8_0, Q4_1, Q5_0, Q5_1, IQ4_NL:
	default:
		panic(fmt.Sprintf("quant: MatMulRowsQ8_0 of %s", t))
	}
	checkMatMul("MatMulRowsQ8_0", len(w), t.BlockBytes(), nblocks, rows, len(x), tokens, len(out), outStride)
	matMul(t, bestMatMulPath(), w, nblocks, rows, x, tokens, out, outStride)
}

// MatMulRowsTiled reports whether MatMulRowsQ8_0 multiplies weights of
// type t a group of rows by a group of tokens at a time on this machine,
// reading each weight block once for them all; otherwise it runs a row
// and a token at a time (the types with a min without AVX512-VNNI).
func MatMulRowsTiled(t Type) bool {
	switch bestMatMulPath() {
	case matMulVNNIPath:
		return true
	case matMulAVX2Path:
		return t == Q4_0 || t == Q8_0 || t == IQ4_NL
	}
	return false
}

func checkMatMul(fn string, wlen, wblock, nblocks, rows, xlen, tokens, outlen, outStride int) {
	if nblocks < 0 || rows < 0 || tokens < 0 {
		panic(fmt.Sprintf("quant: %s: negative size (%d blocks, %d rows, %d tokens)", fn, nblocks, rows, tokens))
	}
	if rows == 0 || tokens == 0 {
		return
	}
	if tokens > 1 && outStride < rows {
		panic(fmt.Sprintf("quant: %s: output stride %d is less than %d rows", fn, outStride, rows))
	}
	if nblocks > 0 && wlen/wblock/nblocks < rows {
		panic(fmt.Sprintf("quant: %s: weights have %d bytes, %d rows of %d blocks need %d", fn, wlen, rows, nblocks, rows*nblocks*wblock))
	}
	if nblocks > 0 && xlen/q8_0Bytes/nblocks < tokens {
		panic(fmt.Sprintf("quant: %s: activations have %d bytes, %d tokens of %d blocks need %d", fn, xlen, tokens, nblocks, tokens*nblocks*q8_0Bytes))
	}
	if need := (tokens-1)*outStride + rows; outlen < need {
		panic(fmt.Sprintf("quant: %s: output has %d floats, %d tokens at stride %d need %d", fn, outlen, tokens, outStride, need))
	}
}

// matMul runs MatMul on checked arguments with the given implementation.
func matMul(typ Type, path matMulPath, w []byte, nblocks, rows int, x []byte, tokens int, out []float32, outStride int) {
	if rows == 0 || tokens == 0 {
		return
	}
	if nblocks == 0 {
		for t := 0; t < tokens; t++ {
			clear(out[t*outStride : t*outStride+rows])
		}
		return
	}
	// The kernels address the rows of a group with 32-bit offsets.
	if path == matMulGenericPath || int64(nblocks)*q8_0Bytes*16 > math.MaxInt32 {
		matMulRows(typ, matMulGenericDot(typ), w, nblocks, rows, x, tokens, out, outStride)
		return
	}
	if path == matMulAVX2Path && (typ == Q4_1 || typ == Q5_0 || typ == Q5_1) {
		// No AVX2 tiled kernel for the types with a min (Q5_0's is −16·d):
		// their assembly row kernels, a row and a token at a time.
		dot := DotQ4_1Q8_0
		switch typ {
		case Q5_0:
			dot = DotQ5_0Q8_0
		case Q5_1:
			dot = DotQ5_1Q8_0
		}
		matMulRows(typ, dot, w, nblocks, rows, x, tokens, out, outStride)
		return
	}
	matMulAsm(typ, path == matMulVNNIPath, w, nblocks, rows, x, tokens, out, outStride)
}

// matMulGenericDot returns the Go row kernel of typ.
func matMulGenericDot(typ Type) func(w, x []byte, nblocks int) float32 {
	switch typ {
	case Q4_0:
		return dotQ4_0Q8_0Generic
	case Q8_0:
		return dotQ8_0Q8_0Generic
	case IQ4_NL:
		return dotIQ4_NLQ8_0Generic
	}
	return func(w, x []byte, nblocks int) float32 { return dotQ45Q8_0Generic(typ, w, x, nblocks) }
}

// matMulRows computes the product a row and a token at a time with dot.
func matMulRows(typ Type, dot func(w, x []byte, nblocks int) float32, w []byte, nblocks, rows int, x []byte, tokens int, out []float32, outStride int) {
	wrb, xrb := nblocks*typ.BlockBytes(), nblocks*q8_0Bytes
	for t := 0; t < tokens; t++ {
		xt := x[t*xrb : (t+1)*xrb]
		o := out[t*outStride : t*outStride+rows]
		for r := range o {
			o[r] = dot(w[r*wrb:(r+1)*wrb], xt, nblocks)
		}
	}
}

// matMulAsm drives the assembly kernels over chunks of blocks, tokens and
// rows (see the comment at the top of the file).
func matMulAsm(typ Type, vnni bool, w []byte, nblocks, rows int, x []byte, tokens int, out []float32, outStride int) {
	// The kernels are called directly, not through func values: an
	// indirect call would make the buffers escape to the heap.
	var (
		pack [matMulPackBytes]byte
		sums [matMulSumEntries * 8]byte
	)
	// The AVX2 Q8_0 kernel multiplies signed codes exactly and needs no
	// correction (IQ4_NL packs its table values as such codes), nor do the
	// unsigned codes of the types with a min, whose table differs.
	wb, groupRows, groupShift, mult := typ.BlockBytes(), 8, 2, 0
	switch {
	case typ == Q4_0:
		mult = 8
	case vnni && (typ == Q8_0 || typ == IQ4_NL):
		mult = 128
	}
	minTerms := typ == Q4_1 || typ == Q5_0 || typ == Q5_1
	if vnni {
		groupRows, groupShift = 16, 3
	}
	wrb, xrb := nblocks*wb, nblocks*q8_0Bytes
	for k0 := 0; k0 < nblocks; k0 += matMulChunkBlocks {
		kb := min(matMulChunkBlocks, nblocks-k0)
		accumulate := 0
		if k0 > 0 {
			accumulate = 1
		}
		maxTokens := matMulSumEntries / kb >> groupShift << groupShift
		for t0 := 0; t0 < tokens; t0 += maxTokens {
			tn := min(maxTokens, tokens-t0)
			xt := &x[t0*xrb+k0*q8_0Bytes]
			if minTerms {
				q8ScaledSumsAVX2(xt, xrb, tn, kb, mult, groupShift, &sums[0])
			} else {
				q8SumsAVX2(xt, xrb, tn, kb, mult, groupShift, &sums[0])
			}
			for r0 := 0; r0 < rows; r0 += groupRows {
				n := min(groupRows, rows-r0)
				wr, o := &w[r0*wrb+k0*wb], &out[t0*outStride+r0]
				// While multiplying, prefetch the next group's rows, which
				// are contiguous unless the rows are split into chunks.
				next, nextLen := &w[0], 0
				if r0+n < rows && kb == nblocks {
					next, nextLen = &w[(r0+n)*wrb], min(groupRows, rows-r0-n)*wrb
				}
				switch {
				case vnni && typ == Q4_0:
					packQ4_0VNNI(wr, wrb, n, kb, &pack[0])
					mulPackedVNNI(&pack[0], kb, xt, xrb, tn, &sums[0], o, outStride, n, accumulate, next, nextLen)
				case vnni && typ == Q8_0:
					packQ8_0VNNI(wr, wrb, n, kb, &pack[0])
					mulPackedVNNI(&pack[0], kb, xt, xrb, tn, &sums[0], o, outStride, n, accumulate, next, nextLen)
				case vnni && typ == IQ4_NL:
					packIQ4_NLVNNI(wr, wrb, n, kb, &pack[0])
					mulPackedVNNI(&pack[0], kb, xt, xrb, tn, &sums[0], o, outStride, n, accumulate, next, nextLen)
				case vnni && typ == Q4_1:
					packQ4_1VNNI(wr, wrb, n, kb, &pack[0])
					mulPackedMinVNNI(&pack[0], kb, xt, xrb, tn, &sums[0], o, outStride, n, accumulate, next, nextLen)
				case vnni && typ == Q5_0:
					packQ5_0VNNI(wr, wrb, n, kb, &pack[0])
					mulPackedMinVNNI(&pack[0], kb, xt, xrb, tn, &sums[0], o, outStride, n, accumulate, next, nextLen)
				case vnni:
					packQ5_1VNNI(wr, wrb, n, kb, &pack[0])
					mulPackedMinVNNI(&pack[0], kb, xt, xrb, tn, &sums[0], o, outStride, n, accumulate, next, nextLen)
				case typ == Q4_0:
					packQ4_0AVX2(wr, wrb, n, kb, &pack[0])
					mulPackedQ4_0AVX2(&pack[0], kb, xt, xrb, tn, &sums[0], o, outStride, n, accumulate, next, nextLen)
				case typ == Q8_0:
					packQ8_0AVX2(wr, wrb, n, kb, &pack[0])
					mulPackedQ8_0AVX2(&pack[0], kb, xt, xrb, tn, &sums[0], o, outStride, n, accumulate, next, nextLen)
				default:
					packIQ4_NLAVX2(wr, wrb, n, kb, &pack[0])
					mulPackedQ8_0AVX2(&pack[0], kb, xt, xrb, tn, &sums[0], o, outStride, n, accumulate, next, nextLen)
				}
			}
		}
	}
}

// matMulKVNNI is MatMulKQ8_K for IQ4_XS or a K-quant's weights and
// a batch of tokens on checked arguments, by the VNNI kernels of the
// scheme above, each 32-element sub-block a block. IQ4_XS's codes are the
// table values + 128 and its row scales d·(ls−32); the table holds the
// tokens' Q8_K d and each sub-block's correction −128·Σy from the block
// sums. Q4_K's and Q5_K's codes are unsigned as they are, their row scales
// d·sc and mins −dmin·m, and the table holds d and d·Σy, as for Q4_1.
// Q6_K's blocks hold two sub-blocks of 16 with int8 scales, which its
// kernel applies to integer sums (q8KSums); Q3_K's are packed the same
// way, its codes 0..7 and their offset 4, and Q2_K's, whose kernel adds
// the min term from the mins and the bsums. A chunk is one super-block,
// within which a token's sub-blocks lie 32 bytes apart.
func matMulKVNNI(typ Type, w []byte, nblocks, rows int, x []byte, tokens int, out []float32, outStride int) {
	const (
		sub       = QK_K / 32 // blocks a super-block
		groupRows = 16
	)
	var (
		pack [sub*640 + 640]byte // a packed Q4_1 block a sub-block; Q6_K's d, Q2_K's d, dmin and mins
		sums [matMulSumEntries * 8]byte
	)
	bs := typ.BlockBytes()
	wrb, xrb := nblocks*bs, nblocks*q8_KBytes
	maxTokens := matMulSumEntries / sub
	if typ == Q6_K || typ == Q3_K || typ == Q2_K {
		maxTokens /= 2
	}
	for k := 0; k < nblocks; k++ {
		accumulate := 0
		if k > 0 {
			accumulate = 1
		}
		for t0 := 0; t0 < tokens; t0 += maxTokens {
			tn := min(maxTokens, tokens-t0)
			q8KSums(typ, x[t0*xrb+k*q8_KBytes:], xrb, tn, &sums)
			// The kernel reads a block's codes at offset 2, a Q8_K
			// block's lie at 4.
			xt := &x[t0*xrb+k*q8_KBytes+2]
			for r0 := 0; r0 < rows; r0 += groupRows {
				n := min(groupRows, rows-r0)
				next, nextLen := &w[0], 0
				if r0+n < rows && nblocks == 1 {
					next, nextLen = &w[(r0+n)*wrb], min(groupRows, rows-r0-n)*wrb
				}
				wr, o := &w[r0*wrb+k*bs], &out[t0*outStride+r0]
				switch typ {
				case IQ4_XS:
					packIQ4_XSVNNI(wr, wrb, n, 1, &pack[0])
					mulPackedXSVNNI(&pack[0], sub, xt, xrb, tn, &sums[0], o, outStride, n, accumulate, next, nextLen)
				case Q4_K:
					packQ4_KVNNI(wr, wrb, n, 1, &pack[0])
					mulPackedKMinVNNI(&pack[0], sub, xt, xrb, tn, &sums[0], o, outStride, n, accumulate, next, nextLen)
				case Q5_K:
					packQ5_KVNNI(wr, wrb, n, 1, &pack[0])
					mulPackedKMinVNNI(&pack[0], sub, xt, xrb, tn, &sums[0], o, outStride, n, accumulate, next, nextLen)
				case Q2_K:
					packQ2_KVNNI(wr, wrb, n, 1, &pack[0])
					mulPackedQ2_KVNNI(&pack[0], xt, xrb, tn, &sums[0], o, outStride, n, accumulate, next, nextLen)
				case Q3_K:
					packQ3_KVNNI(wr, wrb, n, 1, &pack[0])
					mulPackedQ6_KVNNI(&pack[0], xt, xrb, tn, &sums[0], o, outStride, n, accumulate, next, nextLen)
				default:
					packQ6_KVNNI(wr, wrb, n, 1, &pack[0])
					mulPackedQ6_KVNNI(&pack[0], xt, xrb, tn, &sums[0], o, outStride, n, accumulate, next, nextLen)
				}
			}
		}
	}
}

// q8KSums fills the table of matMulKVNNI for weights of type typ and one
// Q8_K block of each of tokens tokens, xstride bytes apart at x. The
// entry of sub-block b (of 32, or of 16 for Q6_K, Q3_K and Q2_K: nsub a
// super-block) of token t, at ((t>>3)·nsub + b)·8 + t&7, holds the block's
// d and, from the block sums Σy of the sub-block, −128·Σy as int32
// (IQ4_XS), d·Σy as float32 (Q4_K, Q5_K), −32·Σy (Q6_K), −4·Σy (Q3_K)
// or 0 (Q2_K) as int32.
func q8KSums(typ Type, x []byte, xstride, tokens int, sums *[matMulSumEntries * 8]byte) {
	// The table as words: entry e is words 2e (d) and 2e+1. A token's
	// entries are 8 apart, one per sub-block.
	s32 := (*[matMulSumEntries * 2]uint32)(unsafe.Pointer(sums))
	if typ == Q6_K || typ == Q3_K || typ == Q2_K {
		var offset int32 // Q2_K's codes have none
		switch typ {
		case Q6_K:
			offset = 32
		case Q3_K:
			offset = 4
		}
		for t := 0; t < tokens; t++ {
			b := x[t*xstride : t*xstride+q8_KBytes]
			d := binary.LittleEndian.Uint32(b)
			e := 2 * ((t>>3)*16<<3 + t&7)
			for sb := 0; sb < QK_K/16; sb, e = sb+1, e+16 {
				s32[e] = d
				s32[e+1] = uint32(-offset * int32(int16(binary.LittleEndian.Uint16(b[260+2*sb:]))))
			}
		}
		return
	}
	for t := 0; t < tokens; t++ {
		b := x[t*xstride : t*xstride+q8_KBytes]
		db := binary.LittleEndian.Uint32(b)
		d := math.Float32frombits(db)
		e := 2 * ((t>>3)*8<<3 + t&7)
		for sb := 0; sb < QK_K/32; sb, e = sb+1, e+16 {
			s := int32(int16(binary.LittleEndian.Uint16(b[260+4*sb:]))) + int32(int16(binary.LittleEndian.Uint16(b[262+4*sb:])))
			s32[e] = db
			if typ == IQ4_XS {
				s32[e+1] = uint32(-128 * s)
			} else {
				s32[e+1] = math.Float32bits(d * float32(s))
			}
		}
	}
}
