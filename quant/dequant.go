package quant

import "fmt"

// dequantRow decodes len(dst) elements of type t from src, which the caller
// has checked holds exactly that many. It reports false for types it does not
// decode. A switch rather than a table of funcs keeps dst from escaping, so
// DotF32's stack buffer stays on the stack.
func dequantRow(t Type, src []byte, dst []float32) bool {
	switch t {
	case F32:
		dequantF32(src, dst)
	case F16:
		dequantF16(src, dst)
	case BF16:
		dequantBF16(src, dst)
	case Q4_0:
		dequantQ4_0(src, dst)
	case Q4_1:
		dequantQ4_1(src, dst)
	case Q5_0:
		dequantQ5_0(src, dst)
	case Q5_1:
		dequantQ5_1(src, dst)
	case Q8_0:
		dequantQ8_0(src, dst)
	case Q8_K:
		dequantQ8_K(src, dst)
	case Q2_K:
		dequantQ2_K(src, dst)
	case Q3_K:
		dequantQ3_K(src, dst)
	case Q4_K:
		dequantQ4_K(src, dst)
	case Q5_K:
		dequantQ5_K(src, dst)
	case Q6_K:
		dequantQ6_K(src, dst)
	case IQ4_NL:
		dequantIQ4_NL(src, dst)
	case IQ4_XS:
		dequantIQ4_XS(src, dst)
	default:
		return false
	}
	return true
}

// DequantizeSupported reports whether Dequantize and DotF32 handle t.
func DequantizeSupported(t Type) bool {
	return dequantRow(t, nil, nil)
}

// Dequantize decodes len(dst) elements of type t from src, which must hold
// exactly those elements.
func Dequantize(t Type, src []byte, dst []float32) error {
	if !DequantizeSupported(t) {
		return fmt.Errorf("quant: dequantize: unsupported type %v", t)
	}
	if err := checkRow(t, len(src), len(dst)); err != nil {
		return fmt.Errorf("quant: dequantize: %w", err)
	}
	dequantRow(t, src, dst)
	return nil
}

// checkRow checks that nbytes is exactly the size of n elements of t.
func checkRow(t Type, nbytes, n int) error {
	want, err := t.RowBytes(uint64(n))
	if err != nil {
		return err
	}
	if uint64(nbytes) != want {
		return fmt.Errorf("%d %v elements take %d bytes, have %d", n, t, want, nbytes)
	}
	return nil
}
