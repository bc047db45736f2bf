package cuda

import (
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
	attention, sampleChain                            *cu.Function

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
			names = []string{"attention"}
		case "sampler":
			names = []string{"sample_chain"}
		default:
			for t := wtF32; t <= wtQ8_0; t++ {
				names = append(names, op+"_"+t.suffix())
				if op == "matvec" {
					names = append(names, "matvec_add_"+t.suffix())
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
	}
	k.attention, k.sampleChain = funcs["attention"], funcs["sample_chain"]
	// The sampler's candidates and a long context's attention scores need
	// more than the default 48 KiB of shared memory.
	if max := c.Info.MaxSharedOptin - 1024; max > 48<<10 {
		for _, f := range []*cu.Function{k.attention, k.sampleChain} {
			if err := c.SetMaxDynamicShared(f, max); err != nil {
				return nil, err
			}
		}
	}
	if err := k.loadPrefill(c, target, dir); err != nil {
		return nil, err
	}
	return k, nil
}

func (k *kernelSet) unload() {
	for _, m := range k.modules {
		m.Unload()
	}
	k.modules = nil
}
