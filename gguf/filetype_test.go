package gguf

import (
	"testing"

	"gotok/quant"
)

func TestFileType(t *testing.T) {
	for typ, want := range map[quant.Type]FileType{quant.F32: 0, quant.F16: 1, quant.Q4_0: 2, quant.Q8_0: 7, quant.BF16: 32, quant.Q6_K: 18} {
		got, ok := FileTypeOf(typ)
		if !ok || got != want || got.String() != typ.String() {
			t.Errorf("FileTypeOf(%s) = %d %v", typ, got, ok)
		}
	}
	if _, ok := FileTypeOf(quant.Q4_K); ok { // only as Q4_K_S / Q4_K_M mixes
		t.Error("Q4_K has a plain file type")
	}
	if FileType(15).String() != "Q4_K_M" || FileType(99).String() != "99" {
		t.Error("FileType names")
	}
}
