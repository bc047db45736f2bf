package cuda

import (
	"fmt"
	"math"

	"gotok/backend/cuda/cu"
	"gotok/model"
	"gotok/quant"
)

// gpuType is a weight layout the kernels read; the numbers are the WT_*
// constants of kernels/common.cuh.
type gpuType int

const (
	wtF32 gpuType = iota
	wtF16
	wtQ4_0
	wtQ8_0
)

// suffix is the kernel name suffix of the layout (matvec_q4_0, …).
func (t gpuType) suffix() string {
	return [...]string{"f32", "f16", "q4_0", "q8_0"}[t]
}

// hostMatrix is a weight matrix in the kernels' layout, before upload. Every
// row is split into 32-element blocks (F32/F16 rows are zero-padded to a
// whole block). For Q4_0 and Q8_0 the quants of all blocks come first (16 or
// 32 bytes each, so each lane's load is one or two aligned 16-byte reads)
// and the f16 scales apart in D; GGML's interleaved 18/34-byte blocks would
// leave the quants misaligned.
type hostMatrix struct {
	Type       gpuType
	Rows, Cols int
	Q, D       []byte
}

// blocks is the number of 32-element blocks in a row.
func (m *hostMatrix) blocks() int { return (m.Cols + 31) / 32 }

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
		qb, gt := 16, wtQ4_0
		if typ == quant.Q8_0 {
			qb, gt = 32, wtQ8_0
		}
		m := hostMatrix{Type: gt, Rows: rows, Cols: cols, Q: make([]byte, rows*nb*qb), D: make([]byte, rows*nb*2)}
		bb := 2 + qb
		for blk := 0; blk < rows*nb; blk++ {
			src := data[blk*bb : (blk+1)*bb]
			copy(m.D[2*blk:], src[:2])
			copy(m.Q[blk*qb:], src[2:])
		}
		return m, nil
	case quant.F32:
		m := hostMatrix{Type: wtF32, Rows: rows, Cols: cols, Q: make([]byte, rows*nb*32*4)}
		for r := 0; r < rows; r++ {
			copy(m.Q[r*nb*128:], data[r*cols*4:(r+1)*cols*4])
		}
		return m, nil
	case quant.F16:
		m := hostMatrix{Type: wtF16, Rows: rows, Cols: cols, Q: make([]byte, rows*nb*32*2)}
		for r := 0; r < rows; r++ {
			copy(m.Q[r*nb*64:], data[r*cols*2:(r+1)*cols*2])
		}
		return m, nil
	case quant.BF16:
		// No bf16 kernels: widen to f32, exactly.
		m := hostMatrix{Type: wtF32, Rows: rows, Cols: cols, Q: make([]byte, rows*nb*32*4)}
		for r := 0; r < rows; r++ {
			for c := 0; c < cols; c++ {
				h := uint16(data[2*(r*cols+c)]) | uint16(data[2*(r*cols+c)+1])<<8
				putF32(m.Q[4*(r*nb*32+c):], quant.BF16ToF32(h))
			}
		}
		return m, nil
	}
	return hostMatrix{}, fmt.Errorf("type %s is not supported by the CUDA kernels (they run F32, F16, BF16, Q4_0 and Q8_0)", typ)
}

// stackRows puts matrices of one layout and row length on top of each other
// (Q, K and V become one projection).
func stackRows(ms ...hostMatrix) (hostMatrix, error) {
	out := hostMatrix{Type: ms[0].Type, Cols: ms[0].Cols}
	for _, m := range ms {
		if m.Type != out.Type || m.Cols != out.Cols {
			return hostMatrix{}, fmt.Errorf("cannot stack a %d-column %s matrix on a %d-column %s one",
				m.Cols, m.Type.suffix(), out.Cols, out.Type.suffix())
		}
		out.Rows += m.Rows
		out.Q = append(out.Q, m.Q...)
		out.D = append(out.D, m.D...)
	}
	return out, nil
}

// deviceMatrix is an uploaded hostMatrix.
type deviceMatrix struct {
	Type       gpuType
	Rows, Cols int
	Q, D       cu.DevicePtr
	Bytes      int
}

// span is the device memory the matrix's quants and scales take: the
// weight arena (weightStage) puts the scales right after the quants.
func (m *deviceMatrix) span() (cu.DevicePtr, int) {
	if m.D == 0 {
		return m.Q, m.Bytes
	}
	return m.Q, int(m.D-m.Q) + 2*m.Rows*m.blocks()
}

func (m *deviceMatrix) blocks() int { return (m.Cols + 31) / 32 }

// upload copies m to the device.
func upload(c *cu.Context, m hostMatrix) (deviceMatrix, error) {
	d := deviceMatrix{Type: m.Type, Rows: m.Rows, Cols: m.Cols}
	var err error
	if d.Q, err = uploadBytes(c, m.Q); err != nil {
		return d, err
	}
	if len(m.D) > 0 {
		if d.D, err = uploadBytes(c, m.D); err != nil {
			c.Free(d.Q)
			return d, err
		}
	}
	d.Bytes = len(m.Q) + len(m.D)
	return d, nil
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
