package cuda

import (
	"math/rand/v2"
	"strings"
	"testing"

	"gotok/quant"
)

// TestLayoutRoundTrip checks on the CPU that the kernels' layout holds the
// same numbers as GGML's: dequantizing the re-laid-out blocks gives the
// GGML values.
func TestLayoutRoundTrip(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 7))
	for _, typ := range []quant.Type{quant.Q4_0, quant.Q8_0, quant.F16, quant.F32} {
		for _, cols := range []int{32, 96, 172} {
			if cols%32 != 0 && typ.BlockSize() == 32 {
				continue
			}
			rows := 5
			_, want, m := randWeights(t, r, typ, rows, cols)
			nb := m.blocks()
			for row := 0; row < rows; row++ {
				for c := 0; c < cols; c++ {
					got := layoutValue(m, row, c)
					if got != want[row][c] {
						t.Fatalf("%s cols %d: [%d][%d] = %v, want %v", typ, cols, row, c, got, want[row][c])
					}
				}
				// Padding past the row must be zero for the kernels' whole-block loads.
				for c := cols; c < nb*32; c++ {
					if v := layoutValue(m, row, c); v != 0 {
						t.Fatalf("%s cols %d: padding [%d][%d] = %v", typ, cols, row, c, v)
					}
				}
			}
		}
	}
}

// layoutValue reads element (row, c) of a hostMatrix the way the kernels do.
func layoutValue(m hostMatrix, row, c int) float64 {
	nb := m.blocks()
	blk := row*nb + c/32
	j := c % 32
	switch m.Type {
	case wtF32:
		return float64(bytesF32(m.Q[4*(row*nb*32+c) : 4*(row*nb*32+c)+4])[0])
	case wtF16:
		i := 2 * (row*nb*32 + c)
		return float64(quant.F16ToF32(uint16(m.Q[i]) | uint16(m.Q[i+1])<<8))
	case wtQ4_0:
		d := quant.F16ToF32(uint16(m.D[2*blk]) | uint16(m.D[2*blk+1])<<8)
		b := m.Q[blk*16+j%16]
		n := b & 15
		if j >= 16 {
			n = b >> 4
		}
		return float64(d * float32(int(n)-8))
	case wtQ8_0:
		d := quant.F16ToF32(uint16(m.D[2*blk]) | uint16(m.D[2*blk+1])<<8)
		return float64(d * float32(int8(m.Q[blk*32+j])))
	}
	panic("unknown layout")
}

func TestLayoutRejectsUnsupportedTypes(t *testing.T) {
	data := make([]byte, 144)
	_, err := layoutRows(quant.Q4_K, data, 1, 256)
	if err == nil || !strings.Contains(err.Error(), "Q4_K") {
		t.Errorf("Q4_K layout: %v, want an error naming the type", err)
	}
	if _, err := layoutRows(quant.Q4_0, data[:17], 1, 32); err == nil {
		t.Error("a short Q4_0 tensor was accepted")
	}
}

func TestStackRows(t *testing.T) {
	r := rand.New(rand.NewPCG(8, 8))
	_, _, a := randWeights(t, r, quant.Q4_0, 3, 64)
	_, _, b := randWeights(t, r, quant.Q4_0, 2, 64)
	s, err := stackRows(a, b)
	if err != nil || s.Rows != 5 || len(s.Q) != len(a.Q)+len(b.Q) || len(s.D) != len(a.D)+len(b.D) {
		t.Fatalf("stackRows: %+v, %v", s.Rows, err)
	}
	if layoutValue(s, 4, 33) != layoutValue(b, 1, 33) {
		t.Error("stacked row 4 is not b's row 1")
	}
	_, _, c := randWeights(t, r, quant.Q8_0, 2, 64)
	if _, err := stackRows(a, c); err == nil {
		t.Error("stacking Q4_0 on Q8_0 succeeded")
	}
}
