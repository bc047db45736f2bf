package cuda

import (
	"fmt"
	"os"

	"gotok/backend/cuda/cu"
	"gotok/backend/cuda/kernels"
)

// ptxDirEnv names a directory of freshly built PTX to load instead of the
// embedded files (on a GPU machine, before the PTX is committed).
const ptxDirEnv = "GOTOK_CUDA_PTX_DIR"

// kernelSet holds every kernel entry point, per weight layout where the
// kernel reads weights.
type kernelSet struct {
	modules []*cu.Module

	embed, qkvRope, gateUp, matvec, matvecAdd, logits [4]*cu.Function
	// The _r2 and _r1 variants: two rows (or units) per warp, and one.
	qkvRope2, gateUp2, matvecAdd2, logits2 [4]*cu.Function
	gateUp1, matvecAdd1                    [4]*cu.Function
	attention                              [attMaxNQ + 1]*cu.Function // by float4s per lane
	sampleChain                            *cu.Function

	pre prefillKernels // the batched prefill's kernels (prefill_kernels.go)
}

// loadKernels JIT-compiles the kernel modules for c's device.
func loadKernels(c *cu.Context) (_ *kernelSet, err error) {
	target := kernels.Target(c.Info.Major)
	dir := os.Getenv(ptxDirEnv)
	k := &kernelSet{}
	defer func() {
		if err != nil {
			k.unload()
		}
	}()
	funcs := map[string]*cu.Function{}
	for _, op := range []string{"embed", "qkv_rope", "attention", "gate_up", "matvec", "logits", "sampler"} {
		ptx, err := kernels.PTX(op, target, dir)
		if err != nil {
			return nil, err
		}
		m, err := c.LoadModule(op, ptx)
		if err != nil {
			return nil, err
		}
		k.modules = append(k.modules, m)
		var names []string
		switch op {
		case "attention":
			for nq := 1; nq <= attMaxNQ; nq++ {
				names = append(names, fmt.Sprintf("attention_%d", nq))
			}
		case "sampler":
			names = []string{"sample_chain"}
		default:
			for t := wtF32; t <= wtQ8_0; t++ {
				names = append(names, op+"_"+t.suffix())
				if op == "matvec" {
					names = append(names, "matvec_add_"+t.suffix())
				}
				if op != "embed" {
					names = append(names, op+"_"+t.suffix()+"_r2")
				}
				if op == "gate_up" || op == "matvec" {
					names = append(names, op+"_"+t.suffix()+"_r1")
				}
				if op == "matvec" {
					names = append(names, "matvec_add_"+t.suffix()+"_r2", "matvec_add_"+t.suffix()+"_r1")
				}
			}
		}
		for _, n := range names {
			f, err := m.Function(n)
			if err != nil {
				return nil, err
			}
			funcs[n] = f
		}
	}
	for t := wtF32; t <= wtQ8_0; t++ {
		s := t.suffix()
		k.embed[t] = funcs["embed_"+s]
		k.qkvRope[t] = funcs["qkv_rope_"+s]
		k.gateUp[t] = funcs["gate_up_"+s]
		k.matvec[t] = funcs["matvec_"+s]
		k.matvecAdd[t] = funcs["matvec_add_"+s]
		k.logits[t] = funcs["logits_"+s]
		k.qkvRope2[t] = funcs["qkv_rope_"+s+"_r2"]
		k.gateUp2[t] = funcs["gate_up_"+s+"_r2"]
		k.matvecAdd2[t] = funcs["matvec_add_"+s+"_r2"]
		k.logits2[t] = funcs["logits_"+s+"_r2"]
		k.gateUp1[t] = funcs["gate_up_"+s+"_r1"]
		k.matvecAdd1[t] = funcs["matvec_add_"+s+"_r1"]
	}
	for nq := 1; nq <= attMaxNQ; nq++ {
		k.attention[nq] = funcs[fmt.Sprintf("attention_%d", nq)]
	}
	k.sampleChain = funcs["sample_chain"]
	// One shared-memory carveout for every kernel of the decode step: the
	// driver drains an SM to change it, which would stall each launch that
	// follows a kernel with another one (the default picks per kernel).
	decode := []*cu.Function{k.attention[1], k.attention[2], k.attention[3], k.attention[4]}
	for _, fs := range [][4]*cu.Function{k.embed, k.qkvRope, k.gateUp, k.matvec, k.matvecAdd, k.logits, k.qkvRope2, k.gateUp2, k.matvecAdd2, k.logits2, k.gateUp1, k.matvecAdd1} {
		decode = append(decode, fs[:]...)
	}
	for _, f := range decode {
		if err := c.SetSharedCarveout(f, decodeCarveout); err != nil {
			return nil, err
		}
	}
	// The sampler's candidates need more than the default 48 KiB of shared
	// memory (its size, not the device's most: a kernel allowed more than
	// it uses may get a larger shared-memory carveout than it needs).
	if sampShared > 48<<10 {
		if err := c.SetMaxDynamicShared(k.sampleChain, sampShared); err != nil {
			return nil, err
		}
	}
	if err := k.loadPrefill(c, target, dir); err != nil {
		return nil, err
	}
	return k, nil
}

// decodeCarveout is the decode kernels' shared-memory share of L1, in
// percent: a quarter (64 KiB on Hopper) holds a few attention blocks' ~10
// KiB; the matrix kernels use none.
const decodeCarveout = 25

func (k *kernelSet) unload() {
	for _, m := range k.modules {
		m.Unload()
	}
	k.modules = nil
}
