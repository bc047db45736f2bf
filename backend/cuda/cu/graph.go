package cu

import (
	"fmt"
	"unsafe"
)

// Graph is an instantiated, launchable CUDA graph (CUgraphExec).
type Graph struct {
	c     *Context
	g     uintptr // the captured graph, kept to count its nodes
	exec  uintptr
	Nodes int // kernel launches, copies and memsets in one replay
}

// captureModeRelaxed lets other threads use the driver while a stream is
// being captured; the engine captures on one stream from one goroutine.
const captureModeRelaxed = 2

// Capture records everything record enqueues on s into a graph and
// instantiates it. Nothing runs during capture.
func (c *Context) Capture(s Stream, record func() error) (*Graph, error) {
	if err := c.do("cuStreamBeginCapture", c.d.fn.cuStreamBeginCapture, uintptr(s), captureModeRelaxed); err != nil {
		return nil, err
	}
	recErr := record()
	var g uintptr
	endErr := c.do("cuStreamEndCapture", c.d.fn.cuStreamEndCapture, uintptr(s), uintptr(unsafe.Pointer(&g)))
	if recErr != nil {
		if g != 0 {
			c.do("cuGraphDestroy", c.d.fn.cuGraphDestroy, g)
		}
		return nil, fmt.Errorf("capturing graph: %w", recErr)
	}
	if endErr != nil {
		return nil, endErr
	}
	gr := &Graph{c: c, g: g}
	var n uintptr
	if err := c.do("cuGraphGetNodes", c.d.fn.cuGraphGetNodes, g, 0, uintptr(unsafe.Pointer(&n))); err != nil {
		gr.Destroy()
		return nil, err
	}
	gr.Nodes = int(n)
	if err := c.do("cuGraphInstantiate", c.d.fn.cuGraphInstantiateWithFlags, uintptr(unsafe.Pointer(&gr.exec)), g, 0); err != nil {
		gr.Destroy()
		return nil, err
	}
	return gr, nil
}

// Launch enqueues one replay of the graph on s.
func (g *Graph) Launch(s Stream) error {
	return g.c.do("cuGraphLaunch", g.c.d.fn.cuGraphLaunch, g.exec, uintptr(s))
}

// Destroy releases the graph.
func (g *Graph) Destroy() error {
	var err error
	if g.exec != 0 {
		err = g.c.do("cuGraphExecDestroy", g.c.d.fn.cuGraphExecDestroy, g.exec)
		g.exec = 0
	}
	if g.g != 0 {
		if e := g.c.do("cuGraphDestroy", g.c.d.fn.cuGraphDestroy, g.g); err == nil {
			err = e
		}
		g.g = 0
	}
	return err
}
