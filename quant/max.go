package quant

// Max returns the largest element of x, or NaN if x holds a NaN. Of
// zeros of both signs it may return either. x must not be empty.
func Max(x []float32) float32 {
	if len(x) == 0 {
		panic("quant: Max: empty slice")
	}
	if useAVX2 && len(x) >= 8 {
		return maxAVX2(&x[0], len(x))
	}
	return maxGeneric(x)
}

func maxGeneric(x []float32) float32 {
	m := x[0]
	for _, v := range x[1:] {
		m = max(m, v)
	}
	return m
}
