//go:build amd64 && !purego

package quant

// dotQ4KRowAVX2 and dotQ5KRowAVX2 return the dot product of nblocks Q4_K
// (Q5_K) super-blocks at w with nblocks Q8_K blocks at x, all in assembly.
//
//go:noescape
func dotQ4KRowAVX2(w, x *byte, nblocks int) float32

//go:noescape
func dotQ5KRowAVX2(w, x *byte, nblocks int) float32

// dotQ6KRowAVX2 is dotQ4KRowAVX2 for Q6_K.
//
//go:noescape
func dotQ6KRowAVX2(w, x *byte, nblocks int) float32
