//go:build !amd64 || purego

package quant

func q4KSumsAVX2(w, x *byte, sc *int16, nblocks int, out *int32) { panic("unreachable") }
func q6KSumsAVX2(w, x *byte, nblocks int, out *int32)            { panic("unreachable") }
func q5KSumsAVX2(w, x *byte, sc *int16, nblocks int, out *int32) { panic("unreachable") }
