package cuda

import (
	"fmt"
	"maps"
	"slices"

	"gotok/backend/cuda/cu"
	"gotok/backend/cuda/kernels"
	"gotok/quant"
)

// gemmEpilogue says what a prefill gemm does with its product; the numbers
// are EPI_* in kernels/gemm.cu.
type gemmEpilogue int

const (
	gemmStore gemmEpilogue = iota // out f32 = A·Wᵀ
	gemmAdd                       // out f32 += A·Wᵀ
	gemmGLU                       // out f16 = act(A·Gᵀ)∘(A·Uᵀ)
)

func (e gemmEpilogue) String() string { return [...]string{"store", "add", "glu"}[e] }

// prefillHeadDims are the head dimensions prefill_attention is built for.
var prefillHeadDims = []int{16, 32, 64, 96, 128, 256}

// gemmTypes are the families the prefill gemm reads: every one but F32
// (whose models prefill through the decode graph).
var gemmTypes = []gpuType{wtQ4_0, wtQ8_0, wtF16, wtBF16, wtMix}

// dequantTypes are the families dequant.cu writes as f16 rows: gemmTypes
// but F16 and BF16 (gemm_wg copies those as they are; BF16 multiplies
// bf16 activations, prefill_bf16.go).
var dequantTypes = []gpuType{wtQ4_0, wtQ8_0, wtMix}

// prefillKernels are the batched-prefill entry points; gemm is nil for the
// families not in gemmTypes.
type prefillKernels struct {
	embed  [numGPUTypes]*cu.Function
	gemm   [numGPUTypes][3][len(gemmTiles)]*cu.Function // by weight type, epilogue and tile
	wgGemm bool                                         // gemm_wg's tile is loaded (9.0 devices)
	// dequant writes a matrix of the family as f16 rows (dequant.cu); nil
	// for F32, F16 and BF16.
	dequant   [numGPUTypes]*cu.Function
	toBF16    *cu.Function // to_bf16.cu: f16 activations as bf16, for gemm_wg's BF16 products
	wgErr     error        // why it is not, on a 9.0 device
	norm      *cu.Function
	rope      *cu.Function
	qkNorm    *cu.Function         // Q/K norms (prefill_qk_norm)
	branch    *cu.Function         // post-norms and residual multipliers (prefill_branch)
	attention map[int]*cu.Function // by head dimension
	// attentionExt: with sliding windows and soft-capped scores.
	attentionExt map[int]*cu.Function
	// The same over a batched step's paged KV pool.
	attentionPaged, attentionPagedExt map[int]*cu.Function
}

// loadPrefill loads the prefill modules into k (their modules join
// k.modules, so unload frees them).
func (k *kernelSet) loadPrefill(c *cu.Context, dir string) error {
	load := func(op string, names ...string) ([]*cu.Function, error) {
		img, err := kernels.Image(op, c.Info.Major, c.Info.Minor, dir)
		if err != nil {
			return nil, err
		}
		m, err := c.LoadModule(op, img)
		if err != nil {
			return nil, err
		}
		k.modules = append(k.modules, m)
		fs := make([]*cu.Function, len(names))
		for i, n := range names {
			if fs[i], err = m.Function(n); err != nil {
				return nil, fmt.Errorf("cuda: module %s: %w", op, err)
			}
		}
		return fs, nil
	}
	p := &k.pre
	var names []string
	for t := range numGPUTypes {
		names = append(names, "prefill_embed_"+t.suffix())
	}
	fs, err := load("prefill_embed", names...)
	if err != nil {
		return err
	}
	copy(p.embed[:], fs)

	// The gemm tiles: gemm.cu's everywhere, gemm_wg.cu's (wgmma) on 9.0
	// devices, the only ones its sm_90a image runs on; elsewhere its
	// slots stay nil and gemmTileFor never picks it.
	var typed []quant.Type // the typed families with gemms
	for _, q := range slices.Sorted(maps.Keys(typedQuants)) {
		if typedQuants[q].gemm {
			typed = append(typed, q)
		}
	}
	for ti, tile := range gemmTiles {
		op := "gemm"
		if tile.wg {
			if c.Info.Major != 9 || c.Info.Minor != 0 {
				continue
			}
			op = "gemm_wg"
		}
		names = names[:0]
		gemmNames := func(suffix string) {
			for e := gemmStore; e <= gemmGLU; e++ {
				names = append(names, "gemm_"+suffix+"_"+e.String()+tile.suffix)
			}
		}
		for _, t := range gemmTypes {
			gemmNames(t.suffix())
		}
		for _, q := range typed {
			gemmNames(typedQuants[q].suffix)
		}
		if fs, err = load(op, names...); err != nil {
			if tile.wg {
				// A driver that does not take the sm_90a image: gemm.cu's
				// tiles serve, and the tests say why (wgErr).
				p.wgErr = err
				continue
			}
			return err
		}
		// The tiles past 48 KB of shared memory must ask for it, and for
		// all of L1 as shared memory: the driver's own choice fits one
		// block an SM.
		for i, f := range fs {
			if tile.smemMax() <= 48<<10 {
				break
			}
			if err := c.SetMaxDynamicShared(f, tile.smemMax()); err != nil {
				return fmt.Errorf("cuda: %s: %w", names[i], err)
			}
			if err := c.SetSharedCarveout(f, 100); err != nil {
				return fmt.Errorf("cuda: %s: %w", names[i], err)
			}
		}
		take := func(dst *[3][len(gemmTiles)]*cu.Function) {
			for e := range dst {
				dst[e][ti] = fs[0]
				fs = fs[1:]
			}
		}
		for _, t := range gemmTypes {
			take(&p.gemm[t])
		}
		for _, q := range typed {
			take(&k.typed[q].gemm)
		}
		if tile.wg {
			p.wgGemm = true
		}
	}

	names = names[:0]
	for _, t := range dequantTypes {
		names = append(names, "dequant_"+t.suffix())
	}
	if fs, err = load("dequant", names...); err != nil {
		return err
	}
	for i, t := range dequantTypes {
		p.dequant[t] = fs[i]
	}

	if fs, err = load("to_bf16", "to_bf16"); err != nil {
		return err
	}
	p.toBF16 = fs[0]
	if fs, err = load("prefill_norm", "prefill_norm"); err != nil {
		return err
	}
	p.norm = fs[0]
	if fs, err = load("prefill_rope", "prefill_rope"); err != nil {
		return err
	}
	p.rope = fs[0]
	if fs, err = load("prefill_qk_norm", "prefill_qk_norm"); err != nil {
		return err
	}
	p.qkNorm = fs[0]
	if fs, err = load("prefill_branch", "prefill_branch"); err != nil {
		return err
	}
	p.branch = fs[0]
	names = names[:0]
	for _, hd := range prefillHeadDims {
		names = append(names, fmt.Sprintf("prefill_attention_hd%d", hd), fmt.Sprintf("prefill_attention_ext_hd%d", hd),
			fmt.Sprintf("prefill_attention_paged_hd%d", hd), fmt.Sprintf("prefill_attention_paged_ext_hd%d", hd))
	}
	if fs, err = load("prefill_attention", names...); err != nil {
		return err
	}
	p.attention, p.attentionExt = map[int]*cu.Function{}, map[int]*cu.Function{}
	p.attentionPaged, p.attentionPagedExt = map[int]*cu.Function{}, map[int]*cu.Function{}
	for i, hd := range prefillHeadDims {
		p.attention[hd], p.attentionExt[hd] = fs[4*i], fs[4*i+1]
		p.attentionPaged[hd], p.attentionPagedExt[hd] = fs[4*i+2], fs[4*i+3]
	}
	if fs, err = load("rows_argmax", "rows_argmax"); err != nil {
		return err
	}
	k.rowsArgmax = fs[0]
	if fs, err = load("kv_copy", "kv_copy"); err != nil {
		return err
	}
	k.kvCopy = fs[0]
	return nil
}
