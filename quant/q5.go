package quant

import "encoding/binary"

// Q5_0 block (22 bytes, 32 elements):
//
//	d  fp16      scale
//	qh uint32    bit j is the fifth bit of element j (little-endian)
//	qs [16]byte  low four bits, packed as in Q4_0
//
// value = (q - 16) × d.
//
// Q5_1 block (24 bytes, 32 elements): d, m fp16, then qh and qs as Q5_0;
// value = q × d + m.

const (
	q5_0Bytes = 22
	q5_1Bytes = 24
)

func dequantQ5_0(src []byte, dst []float32) {
	for i := 0; i < len(dst)/32; i++ {
		b := (*[q5_0Bytes]byte)(src[i*q5_0Bytes:])
		y := (*[32]float32)(dst[i*32:])
		d := f16At(b[0:])
		qh := binary.LittleEndian.Uint32(b[2:])
		for j := 0; j < 16; j++ {
			lo := int32(b[6+j]&0xf) | int32(qh>>j&1)<<4
			hi := int32(b[6+j]>>4) | int32(qh>>(j+16)&1)<<4
			y[j] = float32(lo-16) * d
			y[j+16] = float32(hi-16) * d
		}
	}
}

func dequantQ5_1(src []byte, dst []float32) {
	for i := 0; i < len(dst)/32; i++ {
		b := (*[q5_1Bytes]byte)(src[i*q5_1Bytes:])
		y := (*[32]float32)(dst[i*32:])
		d, m := f16At(b[0:]), f16At(b[2:])
		qh := binary.LittleEndian.Uint32(b[4:])
		for j := 0; j < 16; j++ {
			lo := uint32(b[8+j]&0xf) | (qh>>j&1)<<4
			hi := uint32(b[8+j]>>4) | (qh>>(j+16)&1)<<4
			y[j] = float32(float32(lo)*d) + m
			y[j+16] = float32(float32(hi)*d) + m
		}
	}
}

// quantQ5_0 follows quantize_row_q5_0_ref.
func quantQ5_0(src []float32, dst []byte) {
	for i := 0; i < len(src)/32; i++ {
		x := (*[32]float32)(src[i*32:])
		b := (*[q5_0Bytes]byte)(dst[i*q5_0Bytes:])
		var amax, max float32
		for _, v := range x {
			if a := abs32(v); amax < a {
				amax, max = a, v
			}
		}
		d := max / -16
		var id float32
		if d != 0 {
			id = 1 / d
		}
		putF16(b[0:], d)
		var qh uint32
		for j := 0; j < 16; j++ {
			lo := truncClamp(float32(x[j]*id)+16.5, 31)
			hi := truncClamp(float32(x[j+16]*id)+16.5, 31)
			b[6+j] = lo&0xf | hi<<4
			qh |= uint32(lo>>4) << j
			qh |= uint32(hi>>4) << (j + 16)
		}
		binary.LittleEndian.PutUint32(b[2:], qh)
	}
}

// quantQ5_1 follows quantize_row_q5_1_ref.
func quantQ5_1(src []float32, dst []byte) {
	for i := 0; i < len(src)/32; i++ {
		x := (*[32]float32)(src[i*32:])
		b := (*[q5_1Bytes]byte)(dst[i*q5_1Bytes:])
		min, max := minMax(x[:])
		d := (max - min) / 31
		var id float32
		if d != 0 {
			id = 1 / d
		}
		putF16(b[0:], d)
		putF16(b[2:], min)
		var qh uint32
		for j := 0; j < 16; j++ {
			lo := truncClamp(float32((x[j]-min)*id)+0.5, 31)
			hi := truncClamp(float32((x[j+16]-min)*id)+0.5, 31)
			b[8+j] = lo&0xf | hi<<4
			qh |= uint32(lo>>4) << j
			qh |= uint32(hi>>4) << (j + 16)
		}
		binary.LittleEndian.PutUint32(b[4:], qh)
	}
}
