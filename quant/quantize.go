package quant

import (
	"fmt"
	"runtime"
	"sync"
)

// quantizers maps each type Quantize supports to its row encoder, a port of
// ggml's quantize_row_*_ref (the rounding used to create model files), but
// for the K-quants and IQ4s (see kquantize.go and iq4.go). Each encodes its
// blocks independently of the others.
var quantizers = map[Type]func(src []float32, dst []byte){
	F32:  quantF32,
	F16:  quantF16,
	BF16: quantBF16,
	Q4_0: quantQ4_0,
	Q4_1: quantQ4_1,
	Q5_0: quantQ5_0,
	Q5_1: quantQ5_1,
	Q8_0: quantQ8_0,
	// A scale search like ggml's, not its bytes; see kquantize.go.
	Q2_K: quantQ2_K,
	Q3_K: quantQ3_K,
	Q4_K: quantQ4_K,
	Q5_K: quantQ5_K,
	Q6_K: quantQ6_K,
	// A scale search like ggml's, not its bytes; see iq4.go.
	IQ4_NL: quantIQ4_NL,
	IQ4_XS: quantIQ4_XS,
}

// QuantizedSupported reports whether Quantize can encode type t.
func QuantizedSupported(t Type) bool {
	_, ok := quantizers[t]
	return ok
}

// Quantize encodes src as type t into dst, which must be exactly the size of
// len(src) elements of t. For all but the K-quants and IQ4s the rounding is
// llama.cpp's reference rounding, so the bytes match what ggml writes for
// the same input.
func Quantize(t Type, src []float32, dst []byte) error {
	enc, ok := quantizers[t]
	if !ok {
		return fmt.Errorf("quant: quantize: unsupported type %v", t)
	}
	if err := checkRow(t, len(dst), len(src)); err != nil {
		return fmt.Errorf("quant: quantize: %w", err)
	}
	// The K-quants' search costs a few hundred operations an element:
	// large inputs are cut into parts of whole blocks, one goroutine each.
	bs, bb := t.BlockSize(), t.BlockBytes()
	blocks := len(src) / bs
	parts := min(runtime.GOMAXPROCS(0), len(src)/parallelMin)
	if parts <= 1 {
		enc(src, dst)
		return nil
	}
	var wg sync.WaitGroup
	for p := range parts {
		b0, b1 := blocks*p/parts, blocks*(p+1)/parts
		wg.Add(1)
		go func() {
			defer wg.Done()
			enc(src[b0*bs:b1*bs], dst[b0*bb:b1*bb])
		}()
	}
	wg.Wait()
	return nil
}

// parallelMin is the fewest elements a goroutine of Quantize takes.
const parallelMin = 1 << 16
