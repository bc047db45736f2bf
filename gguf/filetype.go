package gguf

import (
	"fmt"

	"gotok/quant"
)

// FileType is llama.cpp's general.file_type: what most of a model's weights
// are (llama_ftype).
type FileType uint32

var fileTypeNames = map[FileType]string{
	0: "F32", 1: "F16", 2: "Q4_0", 3: "Q4_1", 7: "Q8_0", 8: "Q5_0", 9: "Q5_1",
	10: "Q2_K", 11: "Q3_K_S", 12: "Q3_K_M", 13: "Q3_K_L", 14: "Q4_K_S", 15: "Q4_K_M",
	16: "Q5_K_S", 17: "Q5_K_M", 18: "Q6_K", 21: "Q2_K_S", 25: "IQ4_NL", 30: "IQ4_XS", 32: "BF16",
}

func (f FileType) String() string {
	if n, ok := fileTypeNames[f]; ok {
		return n
	}
	return fmt.Sprint(uint32(f))
}

// FileTypeOf is the file type of a model whose weights are all of type t.
func FileTypeOf(t quant.Type) (FileType, bool) {
	for ft, name := range fileTypeNames {
		if name == t.String() {
			return ft, true
		}
	}
	return 0, false
}
