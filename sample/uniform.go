package sample

// Uniform returns a number in [0, 1) that depends only on seed and step, so a
// GPU kernel can draw the same number without carrying generator state. The
// exact formula, which kernels copy, with all arithmetic on uint64 modulo 2^64:
//
//	mix(z) = z ^= z >> 30; z *= 0xBF58476D1CE4E5B9;
//	         z ^= z >> 27; z *= 0x94D049BB133111EB;
//	         z ^ (z >> 31)                           // splitmix64's finalizer
//	r      = mix(mix(seed) + (step+1) * 0x9E3779B97F4A7C15)
//	u      = float32(r >> 40) / 2^24                 // exact: 24 bits
//
// For a fixed seed this is splitmix64's stream started at state mix(seed);
// mixing the seed first keeps the streams of nearby seeds unrelated.
func Uniform(seed, step uint64) float32 {
	r := mix64(mix64(seed) + (step+1)*0x9E3779B97F4A7C15)
	return float32(r>>40) * (1.0 / (1 << 24))
}

// mix64 is the output function of splitmix64 (Steele, Lea, Flood 2014), a
// bijection on uint64 with good avalanche.
func mix64(z uint64) uint64 {
	z ^= z >> 30
	z *= 0xBF58476D1CE4E5B9
	z ^= z >> 27
	z *= 0x94D049BB133111EB
	return z ^ (z >> 31)
}
