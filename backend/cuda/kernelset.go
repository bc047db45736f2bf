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
	attention, argmax                                 *cu.Function
}

// loadKernels JIT-compiles the kernel modules for c's device.
func loadKernels(c *cu.Context) (*kernelSet, error) {
	target := kernels.Target(c.Info.Major)
	dir := os.Getenv(ptxDirEnv)
	k := &kernelSet{}
	funcs := map[string]*cu.Function{}
	for _, op := range []string{"embed", "qkv_rope", "attention", "gate_up", "matvec", "logits", "argmax"} {
		ptx, err := kernels.PTX(op, target, dir)
		if err != nil {
			k.unload()
			return nil, err
		}
		m, err := c.LoadModule(op, ptx)
		if err != nil {
			k.unload()
			return nil, err
		}
		k.modules = append(k.modules, m)
		names := []string{op}
		if op != "attention" && op != "argmax" {
			names = nil
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
				k.unload()
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
	k.attention, k.argmax = funcs["attention"], funcs["argmax"]
	// Long rows need more than the default 48 KiB of shared memory for the
	// activations; allow what the device offers (the static part is small).
	if max := c.Info.MaxSharedOptin - 1024; max > 48<<10 {
		for _, fs := range [][4]*cu.Function{k.qkvRope, k.gateUp, k.matvec, k.matvecAdd, k.logits} {
			for _, f := range fs {
				if err := c.SetMaxDynamicShared(f, max); err != nil {
					k.unload()
					return nil, err
				}
			}
		}
	}
	return k, nil
}

func (k *kernelSet) unload() {
	for _, m := range k.modules {
		m.Unload()
	}
	k.modules = nil
}

// maxRowLen is the longest input row the matrix kernels take on c, bounded
// by the shared memory holding the activations (36 floats per 32 elements).
func maxRowLen(c *cu.Context) int {
	smem := max(48<<10, c.Info.MaxSharedOptin-1024)
	return smem / (xsStride * 4) * 32
}

// xsStride mirrors XS_STRIDE in kernels/common.cuh.
const xsStride = 36

func xsBytes(cols int) int { return (cols + 31) / 32 * xsStride * 4 }

func checkRowLen(c *cu.Context, name string, cols int) error {
	if cols > maxRowLen(c) {
		return fmt.Errorf("cuda: %s rows of %d elements exceed the %d that fit in shared memory", name, cols, maxRowLen(c))
	}
	return nil
}
