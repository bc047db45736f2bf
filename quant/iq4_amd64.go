//go:build amd64 && !purego

package quant

// The IQ4 kernels of iq4_amd64.s; their Go callers have checked the lengths.

//go:noescape
func dotIQ4_NLQ8_0AVX2(w, x *byte, nblocks int) float32

//go:noescape
func dotIQ4_XSQ8_KAVX2(w, x *byte, nblocks int) float32
