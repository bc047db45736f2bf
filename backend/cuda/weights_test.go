package cuda

import (
	"math"
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
	types := []quant.Type{quant.Q4_0, quant.Q8_0, quant.F16, quant.BF16, quant.F32}
	for typ := range mixLayouts {
		types = append(types, typ)
	}
	for _, typ := range types {
		for _, cols := range []int{32, 96, 172, 512} {
			if cols%typ.BlockSize() != 0 {
				continue
			}
			rows := 5
			_, want, m := randWeights(t, r, typ, rows, cols)
			if typ == quant.Q4_0 || typ == quant.Q8_0 {
				// Their own layout, and the same bytes read as a mixed one.
				mm, err := m.mix()
				if err != nil {
					t.Fatal(err)
				}
				checkLayout(t, mm, want, rows, cols)
			}
			checkLayout(t, m, want, rows, cols)
		}
	}
}

// checkLayout checks every element of m against want, and the padding.
func checkLayout(t *testing.T, m hostMatrix, want [][]float64, rows, cols int) {
	t.Helper()
	nb := m.blocks()
	for row := 0; row < rows; row++ {
		for c := 0; c < cols; c++ {
			got := layoutValue(m, row, c)
			if d := math.Abs(got - want[row][c]); d > 1e-6*math.Abs(want[row][c]) {
				t.Fatalf("%s (%s) cols %d: [%d][%d] = %v, want %v", m.Quant, m.Type.suffix(), cols, row, c, got, want[row][c])
			}
		}
		// Padding past the row must be zero for the kernels' whole-block loads.
		for c := cols; c < nb*32; c++ {
			if v := layoutValue(m, row, c); v != 0 {
				t.Fatalf("%s cols %d: padding [%d][%d] = %v", m.Quant, cols, row, c, v)
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
	case wtBF16:
		i := 2 * (row*nb*32 + c)
		return float64(quant.BF16ToF32(uint16(m.Q[i]) | uint16(m.Q[i+1])<<8))
	case wtMix:
		q, s, mn, off := m.mixBlock(blk)
		return float64(s[j/16]*float32(q[j]-off) + mn[j/16])
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
	_, err := layoutRows(quant.IQ2_XS, data[:74], 1, 256)
	if err == nil || !strings.Contains(err.Error(), "IQ2_XS") {
		t.Errorf("IQ2_XS layout: %v, want an error naming the type", err)
	}
	if _, err := (hostMatrix{Type: wtF16, Quant: quant.F16}).mix(); err == nil {
		t.Error("an F16 matrix went to the mixed-type kernels")
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
