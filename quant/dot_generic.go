package quant

// Portable Go versions of the dot kernels. They are the fallback off amd64
// (or with the purego tag) and are always compiled, so the tests check them
// on every machine.

func dotQ4_0Q8_0Generic(w, x []byte, nblocks int) float32 {
	var sum float32
	for i := 0; i < nblocks; i++ {
		wb := (*[q4_0Bytes]byte)(w[i*q4_0Bytes:])
		xb := (*[q8_0Bytes]byte)(x[i*q8_0Bytes:])
		sum += float32(q4_0Q8_0Block(wb, xb)) * (f16At(wb[0:]) * f16At(xb[0:]))
	}
	return sum
}

// q4_0Q8_0Block is the integer dot product of one block pair.
func q4_0Q8_0Block(wb *[q4_0Bytes]byte, xb *[q8_0Bytes]byte) int32 {
	var s int32
	for j := 0; j < 16; j++ {
		q := wb[2+j]
		s += (int32(q&0xf)-8)*int32(int8(xb[2+j])) + (int32(q>>4)-8)*int32(int8(xb[18+j]))
	}
	return s
}

func dotQ8_0Q8_0Generic(w, x []byte, nblocks int) float32 {
	var sum float32
	for i := 0; i < nblocks; i++ {
		wb := (*[q8_0Bytes]byte)(w[i*q8_0Bytes:])
		xb := (*[q8_0Bytes]byte)(x[i*q8_0Bytes:])
		sum += float32(q8_0Q8_0Block(wb, xb)) * (f16At(wb[0:]) * f16At(xb[0:]))
	}
	return sum
}

func q8_0Q8_0Block(wb, xb *[q8_0Bytes]byte) int32 {
	var s int32
	for j := 2; j < q8_0Bytes; j++ {
		s += int32(int8(wb[j])) * int32(int8(xb[j]))
	}
	return s
}

func matVecQ4_0Q8_0Generic(w, x []byte, nblocks int, out []float32) {
	rb := nblocks * q4_0Bytes
	for r := range out {
		out[r] = dotQ4_0Q8_0Generic(w[r*rb:], x, nblocks)
	}
}

func matVecQ8_0Q8_0Generic(w, x []byte, nblocks int, out []float32) {
	rb := nblocks * q8_0Bytes
	for r := range out {
		out[r] = dotQ8_0Q8_0Generic(w[r*rb:], x, nblocks)
	}
}

func dotF32Generic(a, b []float32) float32 {
	b = b[:len(a)]
	var s0, s1, s2, s3 float32
	i := 0
	for ; i+4 <= len(a); i += 4 {
		s0 += a[i] * b[i]
		s1 += a[i+1] * b[i+1]
		s2 += a[i+2] * b[i+2]
		s3 += a[i+3] * b[i+3]
	}
	for ; i < len(a); i++ {
		s0 += a[i] * b[i]
	}
	return (s0 + s1) + (s2 + s3)
}

func axpyGeneric(a float32, x, y []float32) {
	y = y[:len(x)]
	for i, v := range x {
		y[i] += a * v
	}
}
