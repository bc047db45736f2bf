package cuda

import (
	"fmt"

	"gotok/backend/cuda/cu"
)

// bf16ActScratch is the bytes of the bf16 copy of a product's activations
// for rows rows: the widest BF16 matrix's rows of bf16, 0 when there is
// none. gemm_wg.cu multiplies BF16 weights by bf16 activations (wgmma has
// no f16-by-bf16 product), rounded from the f16 ones by to_bf16.cu, as
// llama.cpp's cuBLAS path rounds its activations for BF16 weights.
func (b *Backend) bf16ActScratch(rows int) int {
	cols := 0
	if b.output.Type == wtBF16 {
		cols = b.output.Cols
	}
	for i := range b.layers {
		for _, ws := range b.layers[i].products() {
			if ws[0].Type == wtBF16 { // a gate/up pair is of one type
				cols = max(cols, ws[0].Cols)
			}
		}
	}
	return 2 * rows * cols
}

// bf16Activations rounds a product's f16 activations a ([m][k]) to bf16
// into l.bf16Act for gemm_wg's tile, and returns them with that tile. When
// they do not fit the scratch it returns a unchanged with gemm.cu's large
// tile, which reads BF16 weights against f16 activations, unless a test
// fixed the tile.
func (l *launcher) bf16Activations(a cu.DevicePtr, m, k int) (cu.DevicePtr, int, error) {
	if 2*m*k > l.bf16ActBytes {
		if l.gemmTile > 0 {
			return 0, 0, fmt.Errorf("cuda: prefill gemm: %d×%d bf16 activations past the %d bytes of scratch", m, k, l.bf16ActBytes)
		}
		return a, gemmLarge, nil
	}
	const perThread, threads = 8, 256
	n8 := m * k / perThread
	err := l.launch(l.k.pre.toBF16, cu.Dim((n8+threads-1)/threads), threads, 0, cu.Args{a, l.bf16Act, uint64(n8)})
	if err != nil {
		return 0, 0, fmt.Errorf("cuda: prefill gemm: bf16 activations: %w", err)
	}
	return l.bf16Act, gemmWG, nil
}
