package cuda

import (
	"encoding/binary"
	"math"
)

// The decode step's residual stream is fixed point, value·2^resFrac in an
// int64 (RES_FRAC in kernels/common.cuh): the kernels split over many blocks
// add their parts with integer atomics, whose sum does not depend on the
// order they land in.
const resFrac = 30

// residualF32 converts a fixed-point residual stream (little-endian int64s)
// to float32 as the kernels do: round to float32, then scale exactly.
func residualF32(b []byte) []float32 {
	f := make([]float32, len(b)/8)
	for i := range f {
		v := int64(binary.LittleEndian.Uint64(b[8*i:]))
		f[i] = float32(v) * (1.0 / (1 << resFrac))
	}
	return f
}

// residualFixed is f in fixed point, rounded to nearest even as the
// kernels' __float2ll_rn rounds; the values must be under 2^16 in
// magnitude (RES_LIMIT).
func residualFixed(f []float32) []int64 {
	q := make([]int64, len(f))
	for i, v := range f {
		q[i] = int64(math.RoundToEven(float64(v) * (1 << resFrac)))
	}
	return q
}

// residualBytes lays out fixed-point values for the device.
func residualBytes(q []int64) []byte {
	b := make([]byte, 8*len(q))
	for i, v := range q {
		binary.LittleEndian.PutUint64(b[8*i:], uint64(v))
	}
	return b
}
