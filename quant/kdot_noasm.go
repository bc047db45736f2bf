//go:build !amd64 || purego

package quant

func dotQ4KRowAVX2(w, x *byte, nblocks int) float32 { panic("unreachable") }
func dotQ5KRowAVX2(w, x *byte, nblocks int) float32 { panic("unreachable") }
func dotQ6KRowAVX2(w, x *byte, nblocks int) float32 { panic("unreachable") }
