package cuda

import (
	"fmt"
	"os"
	"strings"

	"gotok/backend/cuda/cu"
	"gotok/backend/cuda/kernels"
	"gotok/quant"
)

// ptxDirEnv names a directory of freshly built PTX and cubins to load
// instead of the embedded files (on a GPU machine, before they are
// committed).
const ptxDirEnv = "GOTOK_CUDA_PTX_DIR"

// kernelSet holds every kernel entry point, per weight layout where the
// kernel reads weights.
type kernelSet struct {
	modules []*cu.Module
	// rowsArgmax: the greedy choice of each row of a batched step's logits;
	// kvCopy: a sequence's rows between the pool and the single cache.
	rowsArgmax, kvCopy *cu.Function
	// actQ8: a wide model's int8 activations, once a layer (act_q8.cu);
	// actF32 their float twin for F16 and BF16 rows (act_f32.cu); q8Row
	// the attention heads' outputs as int8 (tuning.attnHeads8).
	actQ8, actF32, q8Row *cu.Function

	embed, qkvRope, logits [numGPUTypes]*cu.Function
	// The _r2 variants: two rows per warp.
	qkvRope2, logits2 [numGPUTypes]*cu.Function
	// qkvRopeExt and qkvRopeExt2: the QKV kernels with the block's
	// variations (no pre-norm, attention temperature).
	qkvRopeExt, qkvRopeExt2 [numGPUTypes]*cu.Function
	// logitsFloat reads a float32 row (the prefill's) instead of the
	// fixed-point residual stream.
	logitsFloat [numGPUTypes]*cu.Function
	// logitsWide: the decode step's head on rows wider than 1,024 for
	// Q8_0 (the typed families': typedKernels.logitsWide).
	logitsWide [numGPUTypes]*cu.Function
	// logitsX8: the decode step's head on act_q8's int8 activations, Q4_0's
	// and Q8_0's (the typed families': typedKernels.logitsX8), or on
	// act_f32's float row, F16's and BF16's (logits_xf_*), by rows' width
	// (logitsX8Kernel); logitsPick ends its step.
	logitsX8   [numGPUTypes][2]*cu.Function
	logitsPick *cu.Function
	// attention by W_o's layout and float4s per lane; ffn by layout and
	// ffnShapes (nil: not compiled).
	attention [numGPUTypes][attMaxNQ + 1]*cu.Function
	// attentionCap: the split kernel with soft-capped scores.
	attentionCap [numGPUTypes][attMaxNQ + 1]*cu.Function
	// attentionCluster: attention_cl, for contexts run whole (sm_90+).
	attentionCluster [numGPUTypes][attMaxNQ + 1]*cu.Function
	// attentionClusterCap: attention_cl with soft-capped scores.
	attentionClusterCap [numGPUTypes][attMaxNQ + 1]*cu.Function
	ffn                 [numGPUTypes][len(ffnShapes)]*cu.Function
	// matvecAdd: the down projection of the split FFN (wide models);
	// matvecAdd8 on int8 hidden units, Q4_0's and Q8_0's (the typed
	// families': typedKernels.matvecAdd8).
	matvecAdd, matvecAdd8 [numGPUTypes]*cu.Function
	// glu: the split FFN's gate/up kernel on act_f32's row, F16's and
	// BF16's (kernels/glu.cu); qkvXF their QKV kernel on it
	// (qkv_rope_xf_*).
	glu, qkvXF  [numGPUTypes]*cu.Function
	sampleChain *cu.Function
	// qkNorm, postnorm and actQ8Post: the block features of other
	// families than llama's (Q/K norms, post-norms).
	qkNorm, postnorm, actQ8Post *cu.Function

	pre prefillKernels // the batched prefill's kernels (prefill_kernels.go)

	// typed are the typed mixed families' kernels by the type they read
	// (typedQuants).
	typed map[quant.Type]*typedKernels

	// int8 are the decode kernels that quantize their activations to int8
	// (kernels/decode.cuh, xq8): qkv_rope's, ffn's and the decode step's
	// head for Q8_0 and the typed mixed families. Their q8_stage takes
	// rows of whole 32-element blocks, which these types' rows are.
	int8 map[*cu.Function]bool
	// int8X8 are the decode kernels that multiply int8 activations only
	// when act_q8 gives them (x8): Q4_0's QKV and FFN kernels, which keep
	// float ones when they stage their input (decode.cuh's xq8), and the
	// heads of logitsX8, which take nothing else.
	int8X8 map[*cu.Function]bool
	// floatX are the decode kernels that take act_f32's float row
	// (kernels/act_f32.cu) in x8's place: the F16 and BF16 heads of
	// logitsX8, glu and qkvXF.
	floatX map[*cu.Function]bool
	// decode are the decode step's kernels, which share one shared-memory
	// carveout (setCarveout).
	decode []*cu.Function
}

// typedKernels are a typed mixed family's decode kernels (kernels/common.cuh,
// FOR_EACH_TYPED_MIX): the wtMix kernels' code and bytes for
// matrices of one type, without their switch over the layouts, which took
// them 168–255 registers a thread. The launcher picks them where every
// matrix a launch reads has that type (launcher.typed).
type typedKernels struct {
	qkvRope2, qkvRopeExt2, ffn, matvecAdd, logits *cu.Function
	// qkvV: the QKV kernels for V of another type (typedFamily.v), plain
	// and ext, on act_q8's activations only (qkvArgs.x8).
	qkvV map[quant.Type][2]*cu.Function
	// logitsWide: the head for rows wider than 1,024 (launcher.logitsWide;
	// Q4_K's only).
	logitsWide *cu.Function
	// matvecAdd8: the split FFN's down projection on int8 hidden units.
	matvecAdd8 *cu.Function
	// logitsX8: the head on act_q8's int8 activations.
	logitsX8 [2]*cu.Function
	// gemm: the prefill's (and batched steps') gemm by epilogue, whose
	// dequantization of each weight tile bounds it at few rows (the
	// K-quants' only: typedFamily.gemm).
	gemm [3][len(gemmTiles)]*cu.Function
}

// typedFamily names a typed family's kernels (suffix) and says which of
// them it has besides the decode step's: gemms (gemm.cu, gemm_wg.cu), and
// QKV kernels for V of the types v (qkv_rope.cu's QKV_ROPE_V list).
type typedFamily struct {
	suffix string
	gemm   bool
	v      []quant.Type
}

// typedQuants are the types with typed kernels (kernels/common.cuh's
// FOR_EACH_TYPED_MIX). llama-quantize gives many mixes' V projection more
// bits than Q and K (package quant/mix): Q4_K_M and Q5_K_M V in Q6_K,
// Q4_K_S in Q5_K, Q3_K_M in Q4_K or Q5_K, Q2_K in Q4_K or Q3_K (Q5_K at
// 70B), IQ4_NL and IQ4_XS in Q5_K; its files of the other types keep a
// Q6_K head.
var typedQuants = map[quant.Type]typedFamily{
	quant.Q4_K:   {suffix: "mixq4k", gemm: true, v: []quant.Type{quant.Q6_K, quant.Q5_K}},
	quant.Q5_K:   {suffix: "mixq5k", gemm: true, v: []quant.Type{quant.Q6_K}},
	quant.Q6_K:   {suffix: "mixq6k", gemm: true},
	quant.Q4_1:   {suffix: "mixq4_1"},
	quant.Q5_0:   {suffix: "mixq5_0"},
	quant.Q5_1:   {suffix: "mixq5_1"},
	quant.Q2_K:   {suffix: "mixq2k", v: []quant.Type{quant.Q4_K, quant.Q3_K, quant.Q5_K}},
	quant.Q3_K:   {suffix: "mixq3k", v: []quant.Type{quant.Q5_K, quant.Q4_K}},
	quant.IQ4_NL: {suffix: "mixiq4nl", v: []quant.Type{quant.Q5_K}},
	quant.IQ4_XS: {suffix: "mixiq4xs", v: []quant.Type{quant.Q5_K}},
}

// qkvVNames are the plain and ext QKV kernels of family fam for V in v:
// qkv_rope(_ext)_<fam>_v<v's family without "mix">_r2.
func qkvVNames(fam typedFamily, v quant.Type) [2]string {
	vs := strings.TrimPrefix(typedQuants[v].suffix, "mix")
	return [2]string{"qkv_rope_" + fam.suffix + "_v" + vs + "_r2", "qkv_rope_ext_" + fam.suffix + "_v" + vs + "_r2"}
}

// setCarveout gives every kernel of the decode step percent of the SM's
// unified L1 as shared memory: one value for all, because the driver
// drains an SM to change it, which would stall each launch that follows
// a kernel with another one (the default picks per kernel).
func (k *kernelSet) setCarveout(c *cu.Context, percent int) error {
	for _, f := range k.decode {
		if err := c.SetSharedCarveout(f, percent); err != nil {
			return err
		}
	}
	return nil
}

// loadKernels JIT-compiles the kernel modules for c's device.
func loadKernels(c *cu.Context) (_ *kernelSet, err error) {
	dir := os.Getenv(ptxDirEnv)
	k := &kernelSet{}
	defer func() {
		if err != nil {
			k.unload()
		}
	}()
	funcs := map[string]*cu.Function{}
	for _, op := range []string{"embed", "qkv_rope", "qk_norm", "attention", "ffn", "matvec_add", "postnorm", "logits", "sampler", "act_q8", "act_f32", "glu"} {
		img, err := kernels.Image(op, c.Info.Major, c.Info.Minor, dir)
		if err != nil {
			return nil, err
		}
		m, err := c.LoadModule(op, img)
		if err != nil {
			return nil, err
		}
		k.modules = append(k.modules, m)
		var names []string
		for t := range numGPUTypes {
			s := t.suffix()
			switch op {
			case "embed":
				names = append(names, "embed_"+s)
			case "qkv_rope":
				names = append(names, "qkv_rope_"+s, "qkv_rope_"+s+"_r2", "qkv_rope_ext_"+s, "qkv_rope_ext_"+s+"_r2")
				if t == wtF16 || t == wtBF16 {
					names = append(names, "qkv_rope_xf_"+s)
				}
			case "logits":
				names = append(names, "logits_"+s, "logits_"+s+"_r2", "logits_float_"+s)
			case "attention":
				for nq := 1; nq <= attMaxNQ; nq++ {
					names = append(names, fmt.Sprintf("attention_%s_%d", s, nq), fmt.Sprintf("attention_cap_%s_%d", s, nq),
						fmt.Sprintf("attention_cl_%s_%d", s, nq), fmt.Sprintf("attention_cl_cap_%s_%d", s, nq))
				}
			case "matvec_add":
				names = append(names, "matvec_add_"+s)
			case "glu":
				if t == wtF16 || t == wtBF16 {
					names = append(names, "glu_"+s)
				}

			case "ffn":
				for i := range ffnShapes {
					if i == 0 || t.quantized() {
						names = append(names, ffnName(t, i))
					}
				}
			}
		}
		for _, fam := range typedQuants {
			s := fam.suffix
			switch op {
			case "qkv_rope":
				names = append(names, "qkv_rope_"+s+"_r2", "qkv_rope_ext_"+s+"_r2")
				for _, v := range fam.v {
					n := qkvVNames(fam, v)
					names = append(names, n[0], n[1])
				}
			case "logits":
				names = append(names, "logits_"+s, "logits_x8_"+s, "logits_x8_"+s+"_c2")
				if s == "mixq4k" {
					names = append(names, "logits_wide_"+s)
				}
			case "matvec_add":
				names = append(names, "matvec_add_"+s, "matvec_add8_"+s)
			case "ffn":
				names = append(names, "ffn_"+s+"_u16w1")
			}
		}
		switch op {
		case "logits":
			names = append(names, "logits_wide_q8_0", "logits_pick")
			for _, s := range []string{"q4_0", "q8_0"} {
				names = append(names, "logits_x8_"+s, "logits_x8_"+s+"_c2")
			}
			for _, s := range []string{"f16", "bf16"} {
				names = append(names, "logits_xf_"+s, "logits_xf_"+s+"_c2")
			}
		case "matvec_add":
			names = append(names, "matvec_add8_q4_0", "matvec_add8_q8_0")
		case "sampler":
			names = []string{"sample_chain"}
		case "qk_norm", "postnorm":
			names = []string{op}
		case "act_q8":
			names = []string{op, "act_q8_post", "q8_row"}
		case "act_f32":
			names = []string{op}
		}
		for _, n := range names {
			f, err := m.Function(n)
			if err != nil {
				return nil, err
			}
			funcs[n] = f
		}
	}
	var decode []*cu.Function
	for t := range numGPUTypes {
		s := t.suffix()
		k.embed[t] = funcs["embed_"+s]
		k.qkvRope[t] = funcs["qkv_rope_"+s]
		k.qkvRope2[t] = funcs["qkv_rope_"+s+"_r2"]
		k.qkvRopeExt[t], k.qkvRopeExt2[t] = funcs["qkv_rope_ext_"+s], funcs["qkv_rope_ext_"+s+"_r2"]
		decode = append(decode, k.qkvRopeExt[t], k.qkvRopeExt2[t])
		k.logits[t] = funcs["logits_"+s]
		k.logits2[t] = funcs["logits_"+s+"_r2"]
		k.logitsFloat[t] = funcs["logits_float_"+s]
		k.matvecAdd[t] = funcs["matvec_add_"+s]
		decode = append(decode, k.embed[t], k.qkvRope[t], k.qkvRope2[t], k.logits[t], k.logits2[t], k.logitsFloat[t], k.matvecAdd[t])
		for nq := 1; nq <= attMaxNQ; nq++ {
			k.attention[t][nq] = funcs[fmt.Sprintf("attention_%s_%d", s, nq)]
			k.attentionCap[t][nq] = funcs[fmt.Sprintf("attention_cap_%s_%d", s, nq)]
			k.attentionCluster[t][nq] = funcs[fmt.Sprintf("attention_cl_%s_%d", s, nq)]
			k.attentionClusterCap[t][nq] = funcs[fmt.Sprintf("attention_cl_cap_%s_%d", s, nq)]
			decode = append(decode, k.attention[t][nq], k.attentionCap[t][nq], k.attentionCluster[t][nq],
				k.attentionClusterCap[t][nq])
		}
		for i := range ffnShapes {
			if f := funcs[ffnName(t, i)]; f != nil {
				k.ffn[t][i] = f
				decode = append(decode, f)
			}
		}
	}
	k.typed = map[quant.Type]*typedKernels{}
	for q, fam := range typedQuants {
		s := fam.suffix
		tk := &typedKernels{qkvRope2: funcs["qkv_rope_"+s+"_r2"], qkvRopeExt2: funcs["qkv_rope_ext_"+s+"_r2"],
			ffn: funcs["ffn_"+s+"_u16w1"], matvecAdd: funcs["matvec_add_"+s], matvecAdd8: funcs["matvec_add8_"+s],
			logits: funcs["logits_"+s], qkvV: map[quant.Type][2]*cu.Function{},
			logitsWide: funcs["logits_wide_"+s], logitsX8: [2]*cu.Function{funcs["logits_x8_"+s], funcs["logits_x8_"+s+"_c2"]}}
		for _, v := range fam.v {
			n := qkvVNames(fam, v)
			tk.qkvV[v] = [2]*cu.Function{funcs[n[0]], funcs[n[1]]}
			decode = append(decode, tk.qkvV[v][0], tk.qkvV[v][1])
		}
		k.typed[q] = tk
		decode = append(decode, tk.qkvRope2, tk.qkvRopeExt2, tk.ffn, tk.matvecAdd, tk.matvecAdd8, tk.logits,
			tk.logitsWide, tk.logitsX8[0], tk.logitsX8[1])
	}
	k.logitsWide[wtQ8_0], k.matvecAdd8[wtQ8_0] = funcs["logits_wide_q8_0"], funcs["matvec_add8_q8_0"]
	k.matvecAdd8[wtQ4_0] = funcs["matvec_add8_q4_0"]
	for _, t := range []gpuType{wtQ4_0, wtQ8_0} {
		k.logitsX8[t] = [2]*cu.Function{funcs["logits_x8_"+t.suffix()], funcs["logits_x8_"+t.suffix()+"_c2"]}
		decode = append(decode, k.logitsX8[t][0], k.logitsX8[t][1])
	}
	k.floatX = map[*cu.Function]bool{}
	for _, t := range []gpuType{wtF16, wtBF16} {
		k.logitsX8[t] = [2]*cu.Function{funcs["logits_xf_"+t.suffix()], funcs["logits_xf_"+t.suffix()+"_c2"]}
		k.glu[t], k.qkvXF[t] = funcs["glu_"+t.suffix()], funcs["qkv_rope_xf_"+t.suffix()]
		decode = append(decode, k.logitsX8[t][0], k.logitsX8[t][1], k.glu[t], k.qkvXF[t])
		for _, f := range []*cu.Function{k.logitsX8[t][0], k.logitsX8[t][1], k.glu[t], k.qkvXF[t]} {
			k.floatX[f] = true
		}
	}
	k.logitsPick = funcs["logits_pick"]
	decode = append(decode, k.logitsWide[wtQ8_0], k.matvecAdd8[wtQ8_0], k.matvecAdd8[wtQ4_0], k.logitsPick)
	// The kernels that round their normed input to int8 (kernels/decode.cuh,
	// xq8). matvec_add8 is not one: its input comes as int8 already
	// (ffnInt8Down says when it runs).
	k.int8 = map[*cu.Function]bool{}
	for _, f := range []*cu.Function{k.qkvRope[wtQ8_0], k.qkvRope2[wtQ8_0], k.qkvRopeExt[wtQ8_0], k.qkvRopeExt2[wtQ8_0],
		k.logits[wtQ8_0], k.logits2[wtQ8_0], k.logitsWide[wtQ8_0]} {
		k.int8[f] = true
	}
	for _, f := range k.ffn[wtQ8_0] {
		k.int8[f] = true
	}
	for _, tk := range k.typed {
		k.int8[tk.qkvRope2], k.int8[tk.qkvRopeExt2], k.int8[tk.ffn], k.int8[tk.logits] = true, true, true, true
		k.int8[tk.logitsWide] = true
		for _, fs := range tk.qkvV {
			k.int8[fs[0]], k.int8[fs[1]] = true, true
		}
	}
	delete(k.int8, nil)
	k.int8X8 = map[*cu.Function]bool{}
	for _, f := range []*cu.Function{k.qkvRope[wtQ4_0], k.qkvRope2[wtQ4_0], k.qkvRopeExt[wtQ4_0], k.qkvRopeExt2[wtQ4_0]} {
		k.int8X8[f] = true
	}
	for _, f := range k.ffn[wtQ4_0] {
		k.int8X8[f] = true
	}
	for _, fs := range [][2]*cu.Function{k.logitsX8[wtQ4_0], k.logitsX8[wtQ8_0]} {
		k.int8X8[fs[0]], k.int8X8[fs[1]] = true, true
	}
	for _, tk := range k.typed {
		k.int8X8[tk.logitsX8[0]], k.int8X8[tk.logitsX8[1]] = true, true
	}
	delete(k.int8X8, nil)
	k.sampleChain = funcs["sample_chain"]
	k.qkNorm, k.postnorm, k.actQ8, k.actQ8Post = funcs["qk_norm"], funcs["postnorm"], funcs["act_q8"], funcs["act_q8_post"]
	k.q8Row = funcs["q8_row"]
	k.actF32 = funcs["act_f32"]
	decode = append(decode, k.qkNorm, k.postnorm, k.actQ8, k.actQ8Post, k.actF32, k.q8Row)
	for _, f := range decode {
		if f != nil {
			k.decode = append(k.decode, f)
		}
	}
	if err := k.setCarveout(c, decodeCarveout); err != nil {
		return nil, err
	}
	// The sampler's candidates need more than the default 48 KiB of shared
	// memory (its size, not the device's most: a kernel allowed more than
	// it uses may get a larger shared-memory carveout than it needs).
	if sampShared > 48<<10 {
		if err := c.SetMaxDynamicShared(k.sampleChain, sampShared); err != nil {
			return nil, err
		}
	}
	if err := k.loadPrefill(c, dir); err != nil {
		return nil, err
	}
	return k, nil
}

// ffnName is the FFN kernel for layout t and shape ffnShapes[i].
func ffnName(t gpuType, i int) string {
	return fmt.Sprintf("ffn_%s_u%dw%d", t.suffix(), ffnShapes[i].units, ffnShapes[i].perWarp)
}

// decodeCarveout is the decode kernels' shared-memory share of L1, in
// percent: a quarter (64 KiB on Hopper) holds a few attention blocks' ~10
// KiB and SmolLM's staged residual streams (5 KiB a block). Wide models
// take more (tuning.carveout): their QKV and FFN blocks stage 37 KiB at
// d 4096.
const decodeCarveout = 25

// readsX8 reports whether kernel f takes act_q8's int8 activations
// (qkvArgs.x8) when given them.
func (k *kernelSet) readsX8(f *cu.Function) bool { return k.int8[f] || k.int8X8[f] }

// rounds8 reports whether kernel f rounds its normed input to int8, given
// act_q8's activations (x8) or not.
func (k *kernelSet) rounds8(f *cu.Function, x8 bool) bool { return k.int8[f] || x8 && k.int8X8[f] }

func (k *kernelSet) unload() {
	for _, m := range k.modules {
		m.Unload()
	}
	k.modules = nil
}
