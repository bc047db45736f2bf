package cuda

import (
	"encoding/binary"
	"fmt"
	"math"

	"gotok/backend/cuda/cu"
	"gotok/model"
	"gotok/quant"
)

// gpuType is the kernel family that reads a weight matrix; the numbers are
// the WT_* constants of kernels/common.cuh. F32, F16, BF16, Q4_0 and Q8_0
// each have kernels of their own (the tuned paths of uniform models);
// wtMix kernels read any quantized layout (mixLayouts), chosen per matrix
// at run time, so one launch can take matrices of different types (Q4_K
// gate and up with a Q6_K down, as llama.cpp's Q4_K_M lays them out).
type gpuType int

const (
	wtF32 gpuType = iota
	wtF16
	wtQ4_0
	wtQ8_0
	wtBF16
	wtMix
	numGPUTypes
)

// suffix is the kernel name suffix of the family (matvec_q4_0, …).
func (t gpuType) suffix() string {
	return [...]string{"f32", "f16", "q4_0", "q8_0", "bf16", "mix"}[t]
}

// quantized reports whether the family's rows are quant blocks (the matrix
// kernels take more rows a warp and more FFN shapes).
func (t gpuType) quantized() bool { return t == wtQ4_0 || t == wtQ8_0 || t == wtMix }

// mixLayout is how the wtMix kernels find one type's numbers. Every row is
// cut into 32-element blocks; block blk = row·nb + b has qBytes of codes at
// Q + blk·qBytes and shares a header of hBytes at D + (blk/hUnit)·hBytes
// with the other blocks of its GGML block (hUnit 8 for the K-quants'
// 256-element super-blocks). The headers keep GGML's own scale bits, and
// the codes are re-packed so that one block's are contiguous: 4-bit codes
// as Q4_0 orders them (byte i: element i in the low nibble, i+16 in the
// high one), 2-bit codes in 8 bytes (pack2), extra high bits one u32 per
// block (packBits; Q5_0's and Q5_1's in their headers) or, for Q6_K's two,
// 8 bytes as pack2 orders codes: so that four elements' bits, one a byte,
// are a shift and a mask away. The sizes stay within 2% of GGML's.
//
// Element i of a block is s·(q_i − off) + m, q_i its code (with its high
// bits), s and m from the header: s the scale of its half (i/16: the
// K-quants with 16-element scales have two), m the min term (zero for the
// types without one). off is the type's code offset (Q4_0: 8, Q8_0 stored
// +128, …). mixBlock decodes a block this way on the host, the twin of
// kernels/weights.cuh.
type mixLayout struct {
	code          int // MX_* in kernels/common.cuh: the tag in the low bits of D
	qBytes        int
	hBytes, hUnit int
}

// mixTagBits is how many low bits of a header pointer hold the layout's
// code; the weight arena aligns every buffer to 256 bytes, so they are free.
const mixTagBits = 4

var mixLayouts = map[quant.Type]mixLayout{
	quant.Q4_0:   {1, 16, 2, 1},
	quant.Q8_0:   {2, 32, 2, 1},
	quant.Q4_1:   {3, 16, 4, 1},   // d, m
	quant.Q5_0:   {4, 16, 6, 1},   // d, qh as two u16
	quant.Q5_1:   {5, 16, 8, 1},   // d, m, qh
	quant.IQ4_NL: {6, 16, 2, 1},   // d
	quant.Q2_K:   {7, 8, 20, 8},   // d, dmin, scales[16]
	quant.Q3_K:   {8, 8, 48, 8},   // d, pad, scales[12], high bits u32[8]
	quant.Q4_K:   {9, 16, 16, 8},  // d, dmin, scales[12]
	quant.Q5_K:   {10, 16, 48, 8}, // d, dmin, scales[12], fifth bits u32[8]
	quant.Q6_K:   {11, 16, 84, 8}, // d, pad, scales[16], top bits u32[16]
	quant.IQ4_XS: {12, 16, 8, 8},  // d, scales_h, scales_l[4]
}

// hostMatrix is a weight matrix in the kernels' layout, before upload. Every
// row is split into 32-element blocks (F32/F16/BF16 rows are zero-padded to
// a whole block). For Q4_0 and Q8_0 the quants of all blocks come first (16
// or 32 bytes each, so each lane's load is one or two aligned 16-byte
// reads) and the f16 scales apart in D; GGML's interleaved 18/34-byte
// blocks would leave the quants misaligned. The other quantized types are
// laid out as mixLayout says, and read by the wtMix kernels.
type hostMatrix struct {
	Type       gpuType
	Quant      quant.Type // the GGML type it came from
	Rows, Cols int
	Q, D       []byte
}

// blocks is the number of 32-element blocks in a row.
func (m *hostMatrix) blocks() int { return (m.Cols + 31) / 32 }

// mix returns m for the wtMix kernels: the same bytes, read through the
// type's mixLayout, or an error when no mix kernel reads its type.
func (m hostMatrix) mix() (hostMatrix, error) {
	if _, ok := mixLayouts[m.Quant]; !ok {
		return m, fmt.Errorf("type %s has no mixed-type kernels", m.Quant)
	}
	m.Type = wtMix
	return m, nil
}

// layoutMatrix converts a model tensor to the kernels' layout. Types the
// kernels cannot run are an error naming the tensor.
func layoutMatrix(t *model.Tensor) (hostMatrix, error) {
	m, err := layoutRows(t.Type, t.Data, t.Rows, t.Cols)
	if err != nil {
		return m, fmt.Errorf("cuda: tensor %s: %w", t.Name, err)
	}
	return m, nil
}

func layoutRows(typ quant.Type, data []byte, rows, cols int) (hostMatrix, error) {
	rb, err := typ.RowBytes(uint64(cols))
	if err != nil {
		return hostMatrix{}, err
	}
	if uint64(len(data)) != rb*uint64(rows) {
		return hostMatrix{}, fmt.Errorf("%d bytes of data for %d×%d %s", len(data), rows, cols, typ)
	}
	nb := (cols + 31) / 32
	switch typ {
	case quant.Q4_0, quant.Q8_0:
		// Their mixed layout is their own (codes, then f16 scales), read by
		// the family of their own.
		m := layoutMix(typ, mixLayouts[typ], data, rows, cols)
		m.Type = map[quant.Type]gpuType{quant.Q4_0: wtQ4_0, quant.Q8_0: wtQ8_0}[typ]
		return m, nil
	case quant.F32:
		m := hostMatrix{Type: wtF32, Quant: typ, Rows: rows, Cols: cols, Q: make([]byte, rows*nb*32*4)}
		for r := 0; r < rows; r++ {
			copy(m.Q[r*nb*128:], data[r*cols*4:(r+1)*cols*4])
		}
		return m, nil
	case quant.F16, quant.BF16:
		gt := wtF16
		if typ == quant.BF16 {
			gt = wtBF16
		}
		m := hostMatrix{Type: gt, Quant: typ, Rows: rows, Cols: cols, Q: make([]byte, rows*nb*32*2)}
		for r := 0; r < rows; r++ {
			copy(m.Q[r*nb*64:], data[r*cols*2:(r+1)*cols*2])
		}
		return m, nil
	}
	if l, ok := mixLayouts[typ]; ok {
		return layoutMix(typ, l, data, rows, cols), nil
	}
	return hostMatrix{}, fmt.Errorf("type %s is not supported by the CUDA kernels (they run F32, F16, BF16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q2_K–Q6_K, IQ4_NL and IQ4_XS)", typ)
}

// layoutMix re-lays GGML blocks of typ as l says; data holds whole rows.
func layoutMix(typ quant.Type, l mixLayout, data []byte, rows, cols int) hostMatrix {
	nb := cols / 32
	m := hostMatrix{Type: wtMix, Quant: typ, Rows: rows, Cols: cols,
		Q: make([]byte, rows*nb*l.qBytes), D: make([]byte, rows*nb/l.hUnit*l.hBytes)}
	gb := typ.BlockBytes() // one GGML block: hUnit·32 elements
	for g := 0; g < rows*nb/l.hUnit; g++ {
		src := data[g*gb : (g+1)*gb]
		q := m.Q[g*l.hUnit*l.qBytes : (g+1)*l.hUnit*l.qBytes]
		h := m.D[g*l.hBytes : (g+1)*l.hBytes]
		switch typ {
		case quant.Q4_0, quant.Q8_0, quant.Q4_1, quant.Q5_0, quant.Q5_1, quant.IQ4_NL, quant.IQ4_XS:
			// The header is the GGML block's first hBytes, its codes the
			// rest, already in the kernels' order; Q5_0's and Q5_1's
			// fifth bits are re-ordered as packBits orders them.
			copy(h, src[:l.hBytes])
			copy(q, src[l.hBytes:])
			if typ == quant.Q5_0 || typ == quant.Q5_1 {
				qh := h[l.hBytes-4:]
				binary.LittleEndian.PutUint32(qh, interleaveBits(binary.LittleEndian.Uint32(qh)))
			}
		case quant.Q2_K:
			copy(h[0:4], src[80:84])
			copy(h[4:20], src[0:16])
			pack2(q, func(e int) byte { r := e % 128; return src[16+32*(e/128)+r%32] >> (2 * (r / 32)) & 3 })
		case quant.Q3_K:
			copy(h[0:2], src[108:110])
			copy(h[4:16], src[96:108])
			pack2(q, func(e int) byte { r := e % 128; return src[32+32*(e/128)+r%32] >> (2 * (r / 32)) & 3 })
			packBits(h[16:48], func(e int) byte { r := e % 128; return src[r%32] >> (4*(e/128) + r/32) & 1 })
		case quant.Q4_K:
			copy(h, src[:16])
			pack4(q, func(e int) byte { r := e % 64; return src[16+32*(e/64)+r%32] >> (4 * (r / 32)) & 15 })
		case quant.Q5_K:
			copy(h[:16], src[:16])
			pack4(q, func(e int) byte { r := e % 64; return src[48+32*(e/64)+r%32] >> (4 * (r / 32)) & 15 })
			packBits(h[16:48], func(e int) byte { return src[16+e%32] >> (e / 32) & 1 })
		case quant.Q6_K:
			copy(h[0:2], src[208:210])
			copy(h[4:20], src[192:208])
			pack4(q, func(e int) byte {
				r := e % 128
				t, l := r/32, r%32
				return src[64*(e/128)+32*(t%2)+l] >> (4 * (t / 2)) & 15
			})
			pack2(h[20:84], func(e int) byte { r := e % 128; return src[128+32*(e/128)+r%32] >> (2 * (r / 32)) & 3 })
		}
	}
	return m
}

// pack4 writes 4-bit codes code(e) of consecutive 32-element blocks, 16
// bytes a block: byte i holds element i in its low nibble and i+16 in its
// high one (Q4_0's order).
func pack4(dst []byte, code func(e int) byte) {
	for b := 0; b < len(dst)/16; b++ {
		for i := 0; i < 16; i++ {
			dst[16*b+i] = code(32*b+i) | code(32*b+i+16)<<4
		}
	}
}

// pack2 writes 2-bit codes, 8 bytes a 32-element block in the order that
// lets the kernels take four elements' codes in a shift and a mask
// (weights.cuh's mix_codes): element 16g+4s+b is bits 2s of byte 4g+b.
func pack2(dst []byte, code func(e int) byte) {
	for b := range dst {
		blk, g, k := b/8, b%8/4, b%4
		var v byte
		for s := 0; s < 4; s++ {
			v |= code(32*blk+16*g+4*s+k) << (2 * s)
		}
		dst[b] = v
	}
}

// two is code i of a block pack2 wrote (b: its 8 bytes).
func two(b []byte, i int) int32 { return int32(b[4*(i/16)+i%4] >> (2 * (i / 4 % 4)) & 3) }

// packBits writes one bit per element, a little-endian u32 per 32-element
// block, in the order interleaveBits gives.
func packBits(dst []byte, bit func(e int) byte) {
	for b := 0; b < len(dst)/4; b++ {
		var w uint32
		for i := 0; i < 32; i++ {
			w |= uint32(bit(32*b+i)) << i
		}
		binary.LittleEndian.PutUint32(dst[4*b:], interleaveBits(w))
	}
}

// interleaveBits moves bit i (element i of a block) to bit 8·(i%4) + i/4,
// so that (w >> s) & 0x01010101 is the bits of elements 4s…4s+3, one a
// byte (weights.cuh's mix_codes).
func interleaveBits(w uint32) uint32 {
	var v uint32
	for i := 0; i < 32; i++ {
		v |= (w >> i & 1) << (8*(i%4) + i/4)
	}
	return v
}

// bitOf is element i's bit of a word interleaveBits wrote.
func bitOf(w uint32, i int) int32 { return int32(w >> (8*(i%4) + i/4) & 1) }

// mixBlock decodes block blk of a wtMix matrix as the kernels do
// (kernels/weights.cuh): element i is s[i/16]·(q[i] − off) + m[i/16].
func (m *hostMatrix) mixBlock(blk int) (q [32]int32, s, mn [2]float32, off int32) {
	l := mixLayouts[m.Quant]
	qb := m.Q[blk*l.qBytes : (blk+1)*l.qBytes]
	h := m.D[blk/l.hUnit*l.hBytes : (blk/l.hUnit+1)*l.hBytes]
	j := blk % l.hUnit // sub-block within the super-block
	f16 := func(b []byte) float32 { return quant.F16ToF32(binary.LittleEndian.Uint16(b)) }
	u32 := func(b []byte) uint32 { return binary.LittleEndian.Uint32(b) }
	nib := func(i int) int32 { return int32(qb[i%16] >> (4 * (i / 16)) & 15) }
	both := func(v float32) [2]float32 { return [2]float32{v, v} }
	switch m.Quant {
	case quant.Q4_0, quant.Q4_1, quant.Q5_0, quant.Q5_1, quant.IQ4_NL, quant.Q4_K, quant.Q5_K, quant.Q6_K, quant.IQ4_XS:
		for i := range q {
			q[i] = nib(i)
		}
	case quant.Q8_0:
		for i := range q {
			q[i] = int32(qb[i] ^ 0x80) // int8 stored +128
		}
		off = 128
	case quant.Q2_K, quant.Q3_K:
		for i := range q {
			q[i] = two(qb, i)
		}
	}
	switch m.Quant {
	case quant.Q4_0:
		s, off = both(f16(h)), 8
	case quant.Q8_0:
		s = both(f16(h))
	case quant.Q4_1:
		s, mn = both(f16(h)), both(f16(h[2:]))
	case quant.Q5_0, quant.Q5_1:
		qh := uint32(binary.LittleEndian.Uint16(h[2:])) | uint32(binary.LittleEndian.Uint16(h[4:]))<<16
		s, off = both(f16(h)), 16
		if m.Quant == quant.Q5_1 {
			qh, off, mn = u32(h[4:]), 0, both(f16(h[2:]))
		}
		for i := range q {
			q[i] |= bitOf(qh, i) << 4
		}
	case quant.IQ4_NL, quant.IQ4_XS:
		d := f16(h)
		if m.Quant == quant.IQ4_XS {
			ls := int32(h[4+j/2]>>(4*(j%2))&15) | int32(binary.LittleEndian.Uint16(h[2:])>>(2*j)&3)<<4
			d *= float32(ls - 32)
		}
		kv := quant.IQ4NLValues()
		for i := range q {
			q[i] = int32(kv[q[i]]) + 128
		}
		s, off = both(d), 128
	case quant.Q2_K:
		d, dmin := f16(h), f16(h[2:])
		for k := 0; k < 2; k++ {
			sc := h[4+2*j+k]
			s[k], mn[k] = d*float32(sc&15), -(dmin * float32(sc>>4))
		}
	case quant.Q3_K:
		d, hm := f16(h), u32(h[16+4*j:])
		for k := 0; k < 2; k++ {
			n := 2*j + k
			sc := int32(h[4+n%8]>>(4*(n/8))&15) | int32(h[12+n%4]>>(2*(n/4))&3)<<4
			s[k] = d * float32(sc-32)
		}
		for i := range q {
			q[i] |= bitOf(hm, i) << 2
		}
		off = 4
	case quant.Q4_K, quant.Q5_K:
		sc, mm := kScaleMin(j, h[4:16])
		s, mn = both(f16(h)*float32(sc)), both(-(f16(h[2:]) * float32(mm)))
		if m.Quant == quant.Q5_K {
			qh := u32(h[16+4*j:])
			for i := range q {
				q[i] |= bitOf(qh, i) << 4
			}
		}
	case quant.Q6_K:
		d, top := f16(h), h[20+8*j:28+8*j]
		for k := 0; k < 2; k++ {
			s[k] = d * float32(int8(h[4+2*j+k]))
		}
		for i := range q {
			q[i] |= two(top, i) << 4
		}
		off = 32
	}
	return
}

// kScaleMin is the 6-bit scale and min of sub-block j of a Q4_K/Q5_K
// super-block's 12 packed bytes (ggml's get_scale_min_k4).
func kScaleMin(j int, s []byte) (sc, m byte) {
	if j < 4 {
		return s[j] & 63, s[j+4] & 63
	}
	return s[j+4]&0xf | s[j-4]>>6<<4, s[j+4]>>4 | s[j]>>6<<4
}

// stackRows puts matrices of one layout and row length on top of each other
// (Q, K and V become one projection). wtMix matrices are never stacked:
// each keeps its own tagged header pointer.
func stackRows(ms ...hostMatrix) (hostMatrix, error) {
	out := hostMatrix{Type: ms[0].Type, Quant: ms[0].Quant, Cols: ms[0].Cols}
	for _, m := range ms {
		if m.Type == wtMix || m.Type != out.Type || m.Quant != out.Quant || m.Cols != out.Cols {
			return hostMatrix{}, fmt.Errorf("cannot stack a %d-column %s matrix on a %d-column %s one",
				m.Cols, m.Quant, out.Cols, out.Quant)
		}
		out.Rows += m.Rows
		out.Q = append(out.Q, m.Q...)
		out.D = append(out.D, m.D...)
	}
	return out, nil
}

// deviceMatrix is an uploaded hostMatrix. A wtMix matrix's D carries its
// layout's code in its low mixTagBits bits (mixLayout).
type deviceMatrix struct {
	Type           gpuType
	Quant          quant.Type
	Rows, Cols     int
	Q, D           cu.DevicePtr
	QBytes, DBytes int
}

// Bytes is the device memory of the matrix's numbers.
func (m *deviceMatrix) Bytes() int { return m.QBytes + m.DBytes }

// header is D without its tag.
func (m *deviceMatrix) header() cu.DevicePtr { return m.D &^ (1<<mixTagBits - 1) }

// span is the device memory the matrix's quants and scales take: the
// weight arena (weightStage) puts the scales right after the quants.
func (m *deviceMatrix) span() (cu.DevicePtr, int) {
	if m.D == 0 {
		return m.Q, m.QBytes
	}
	return m.Q, int(m.header()-m.Q) + m.DBytes
}

func (m *deviceMatrix) blocks() int { return (m.Cols + 31) / 32 }

// rowsFrom is the matrix of rows [r, r+n) of m, sharing its memory; m's
// type must not be wtMix (whose headers group rows in super-blocks and
// carry a tag).
func (m *deviceMatrix) rowsFrom(r, n int) deviceMatrix {
	v := *m
	v.Rows = n
	qRow, dRow := m.QBytes/m.Rows, m.DBytes/m.Rows
	v.Q, v.QBytes = m.Q.Offset(r*qRow), n*qRow
	if m.D != 0 {
		v.D, v.DBytes = m.D.Offset(r*dRow), n*dRow
	}
	return v
}

// upload copies m to the device.
func upload(c *cu.Context, m hostMatrix) (deviceMatrix, error) {
	d := deviceMatrix{Type: m.Type, Quant: m.Quant, Rows: m.Rows, Cols: m.Cols}
	var err error
	if d.Q, err = uploadBytes(c, m.Q); err != nil {
		return d, err
	}
	if len(m.D) > 0 {
		if d.D, err = uploadBytes(c, m.D); err != nil {
			c.Free(d.Q)
			return d, err
		}
		d.D += m.tag()
	}
	d.QBytes, d.DBytes = len(m.Q), len(m.D)
	return d, nil
}

// tag is what a wtMix matrix adds to its header pointer: its layout's code.
func (m *hostMatrix) tag() cu.DevicePtr {
	if m.Type != wtMix {
		return 0
	}
	return cu.DevicePtr(mixLayouts[m.Quant].code)
}

func uploadBytes(c *cu.Context, b []byte) (cu.DevicePtr, error) {
	p, err := c.Alloc(len(b))
	if err != nil {
		return 0, err
	}
	if err := c.CopyHtoD(p, b); err != nil {
		c.Free(p)
		return 0, err
	}
	return p, nil
}

func uploadFloats(c *cu.Context, f []float32) (cu.DevicePtr, error) {
	return uploadBytes(c, f32Bytes(f))
}

func f32Bytes(f []float32) []byte {
	b := make([]byte, 4*len(f))
	for i, v := range f {
		putF32(b[4*i:], v)
	}
	return b
}

func bytesF32(b []byte) []float32 {
	f := make([]float32, len(b)/4)
	for i := range f {
		f[i] = math.Float32frombits(uint32(b[4*i]) | uint32(b[4*i+1])<<8 | uint32(b[4*i+2])<<16 | uint32(b[4*i+3])<<24)
	}
	return f
}

func putF32(b []byte, v float32) {
	u := math.Float32bits(v)
	b[0], b[1], b[2], b[3] = byte(u), byte(u>>8), byte(u>>16), byte(u>>24)
}
