package cu

import (
	"encoding/binary"
	"errors"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
)

// openOrSkip opens device 0 or skips the test with the reason CUDA is unusable.
func openOrSkip(t *testing.T) *Context {
	t.Helper()
	if err := Available(); err != nil {
		t.Skipf("no CUDA here: %v", err)
	}
	c, err := Open(0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func TestAvailableSaysWhy(t *testing.T) {
	err := Available()
	if err == nil {
		t.Log("CUDA is available")
		return
	}
	if !strings.HasPrefix(err.Error(), "cuda: ") {
		t.Errorf("error %q does not say it comes from cuda", err)
	}
	t.Logf("CUDA unavailable, as reported: %v", err)
}

func TestDeviceInfo(t *testing.T) {
	c := openOrSkip(t)
	i := c.Info
	t.Logf("device: %v, driver %d, L2 %d KiB, smem opt-in %d KiB", i, i.DriverVersion, i.L2Bytes>>10, i.MaxSharedOptin>>10)
	if i.Name == "" || i.SMCount <= 0 || i.TotalMem <= 0 || i.Major < 3 {
		t.Errorf("implausible device info %+v", i)
	}
	free, total, err := c.MemInfo()
	if err != nil {
		t.Fatal(err)
	}
	if free <= 0 || free > total {
		t.Errorf("MemInfo free %d total %d", free, total)
	}
}

func randomBytes(r *rand.Rand, n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

func TestCopyRoundTrip(t *testing.T) {
	c := openOrSkip(t)
	r := rand.New(rand.NewPCG(1, 2))
	const n = 1<<20 + 12
	src := randomBytes(r, n)
	a, err := c.Alloc(n)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Free(a)
	b, err := c.Alloc(n)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Free(b)
	if err := c.CopyHtoD(a, src); err != nil {
		t.Fatal(err)
	}
	if err := c.CopyDtoD(b, a, n); err != nil {
		t.Fatal(err)
	}
	got := make([]byte, n)
	if err := c.CopyDtoH(got, b); err != nil {
		t.Fatal(err)
	}
	if string(got) != string(src) {
		t.Fatal("device round trip changed the bytes")
	}
	if err := c.MemsetD32(b.Offset(8), 0xdeadbeef, 3); err != nil {
		t.Fatal(err)
	}
	word := make([]byte, 20)
	if err := c.CopyDtoH(word, b.Offset(4)); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 5; i++ {
		v := binary.LittleEndian.Uint32(word[4*i:])
		want := binary.LittleEndian.Uint32(src[4+4*i:])
		if i >= 1 && i <= 3 {
			want = 0xdeadbeef
		}
		if v != want {
			t.Errorf("word %d after memset = %#x, want %#x", i, v, want)
		}
	}
}

func TestPinnedAsyncCopy(t *testing.T) {
	c := openOrSkip(t)
	s, err := c.NewStream()
	if err != nil {
		t.Fatal(err)
	}
	defer c.DestroyStream(s)
	h, err := c.AllocHost(4096)
	if err != nil {
		t.Fatal(err)
	}
	defer c.FreeHost(h)
	r := rand.New(rand.NewPCG(3, 4))
	want := randomBytes(r, 4096)
	copy(h.Bytes, want)
	d, err := c.Alloc(4096)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Free(d)
	if err := c.CopyHtoDAsync(d, h, 0, 4096, s); err != nil {
		t.Fatal(err)
	}
	if err := c.SyncStream(s); err != nil {
		t.Fatal(err)
	}
	clear(h.Bytes)
	if err := c.CopyDtoHAsync(h, 0, d, 4096, s); err != nil {
		t.Fatal(err)
	}
	if err := c.SyncStream(s); err != nil {
		t.Fatal(err)
	}
	if string(h.Bytes) != string(want) {
		t.Fatal("pinned async round trip changed the bytes")
	}
	if err := c.CopyHtoDAsync(d, h, 4000, 200, s); err == nil {
		t.Error("an out-of-range async copy was accepted")
	}
}

// addPTX adds a float32 constant to n floats: small enough to read, and
// PTX 7.0 / sm_80 so every driver that runs the engine JITs it.
const addPTX = `
.version 7.0
.target sm_80
.address_size 64

.visible .entry add_const(
	.param .u64 p,
	.param .u32 n,
	.param .f32 k
)
{
	.reg .pred %p<2>;
	.reg .b32 %r<6>;
	.reg .f32 %f<4>;
	.reg .b64 %rd<5>;
	ld.param.u64 %rd1, [p];
	ld.param.u32 %r1, [n];
	ld.param.f32 %f3, [k];
	mov.u32 %r2, %ctaid.x;
	mov.u32 %r3, %ntid.x;
	mov.u32 %r4, %tid.x;
	mad.lo.s32 %r5, %r2, %r3, %r4;
	setp.ge.u32 %p1, %r5, %r1;
	@%p1 bra DONE;
	cvta.to.global.u64 %rd2, %rd1;
	mul.wide.u32 %rd3, %r5, 4;
	add.s64 %rd4, %rd2, %rd3;
	ld.global.f32 %f1, [%rd4];
	add.f32 %f2, %f1, %f3;
	st.global.f32 [%rd4], %f2;
DONE:
	ret;
}
`

func floatsToBytes(f []float32) []byte {
	b := make([]byte, 4*len(f))
	for i, v := range f {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(v))
	}
	return b
}

func bytesToFloats(b []byte) []float32 {
	f := make([]float32, len(b)/4)
	for i := range f {
		f[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
	}
	return f
}

func TestLaunchGraphAndEvents(t *testing.T) {
	c := openOrSkip(t)
	m, err := c.LoadModule("add", []byte(addPTX))
	if err != nil {
		t.Fatal(err)
	}
	defer m.Unload()
	f, err := m.Function("add_const")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.Function("no_such_kernel"); err == nil {
		t.Error("looking up a missing kernel succeeded")
	}
	if err := c.SetSharedCarveout(f, 25); err != nil {
		t.Errorf("setting the shared-memory carveout: %v", err)
	}
	const n = 1000
	r := rand.New(rand.NewPCG(5, 6))
	x := make([]float32, n)
	for i := range x {
		x[i] = r.Float32()*2 - 1
	}
	d, err := c.Alloc(4 * n)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Free(d)
	if err := c.CopyHtoD(d, floatsToBytes(x)); err != nil {
		t.Fatal(err)
	}
	s, err := c.NewStream()
	if err != nil {
		t.Fatal(err)
	}
	defer c.DestroyStream(s)
	launch := Launch{Grid: Dim((n + 127) / 128), Block: Dim(128), Stream: s}
	if err := c.Launch(f, launch, Args{d, uint32(n), float32(1.5)}); err != nil {
		t.Fatal(err)
	}
	if err := c.Launch(f, launch, Args{d, n, float32(1.5)}); err == nil {
		t.Error("a Go int kernel argument was accepted")
	}
	g, err := c.Capture(s, func() error {
		if err := c.Launch(f, launch, Args{d, uint32(n), float32(0.25)}); err != nil {
			return err
		}
		return c.Launch(f, launch, Args{d, uint32(n), float32(-2)})
	})
	if err != nil {
		t.Fatal(err)
	}
	defer g.Destroy()
	if g.Nodes != 2 {
		t.Errorf("graph has %d nodes, want 2", g.Nodes)
	}
	start, _ := c.NewEvent()
	end, _ := c.NewEvent()
	defer c.DestroyEvent(start)
	defer c.DestroyEvent(end)
	const replays = 10
	c.Record(start, s)
	for i := 0; i < replays; i++ {
		if err := g.Launch(s); err != nil {
			t.Fatal(err)
		}
	}
	c.Record(end, s)
	if err := c.SyncEvent(end); err != nil {
		t.Fatal(err)
	}
	ms, err := c.Elapsed(start, end)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%d replays of a 2-kernel graph: %.1f µs each", replays, 1000*ms/replays)
	buf := make([]byte, 4*n)
	if err := c.CopyDtoH(buf, d); err != nil {
		t.Fatal(err)
	}
	got := bytesToFloats(buf)
	for i, v := range got {
		want := x[i] + 1.5
		for j := 0; j < replays; j++ {
			want = want + 0.25 - 2
		}
		if math.Abs(float64(v-want)) > 1e-5 {
			t.Fatalf("x[%d] = %v, want %v", i, v, want)
		}
	}
}

func TestLaunchPDL(t *testing.T) {
	c := openOrSkip(t)
	if c.Info.Major < 9 {
		t.Skipf("PDL needs sm_90, device is sm_%d%d", c.Info.Major, c.Info.Minor)
	}
	f, d := addConst(t, c, 256)
	l := Launch{Grid: Dim(2), Block: Dim(128), PDL: true}
	// Without griddepcontrol in the kernel PDL still orders whole kernels
	// when each one ends before the next reads; this checks the launch path.
	if err := c.Launch(f, l, Args{d, uint32(256), float32(1)}); err != nil {
		t.Fatal(err)
	}
	checkAll(t, c, d, 256, 1, "after a PDL launch")
}

// addConst loads the add_const kernel and a zeroed buffer of n floats for
// it, both freed with the test.
func addConst(t *testing.T, c *Context, n int) (*Function, DevicePtr) {
	t.Helper()
	m, err := c.LoadModule("add", []byte(addPTX))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Unload() })
	f, err := m.Function("add_const")
	if err != nil {
		t.Fatal(err)
	}
	d, err := c.Alloc(4 * n)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Free(d) })
	if err := c.MemsetD32(d, 0, n); err != nil {
		t.Fatal(err)
	}
	return f, d
}

// checkAll waits for the context's work and fails unless each of d's n
// floats is want.
func checkAll(t *testing.T, c *Context, d DevicePtr, n int, want float32, what string) {
	t.Helper()
	if err := c.Synchronize(); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 4*n)
	if err := c.CopyDtoH(buf, d); err != nil {
		t.Fatal(err)
	}
	for i, v := range bytesToFloats(buf) {
		if v != want {
			t.Fatalf("x[%d] = %v %s, want %v", i, v, what, want)
		}
	}
}

// TestPersistingL2 sets L2 aside for persisting accesses, runs a kernel
// whose window covers its buffer (alone and with PDL), and releases it.
func TestPersistingL2(t *testing.T) {
	c := openOrSkip(t)
	if c.Info.MaxPersistingL2 == 0 || c.Info.MaxL2Window == 0 {
		t.Skipf("no persisting L2 on %v", c.Info)
	}
	t.Logf("persisting L2 up to %d bytes, windows up to %d", c.Info.MaxPersistingL2, c.Info.MaxL2Window)
	n, err := c.SetPersistingL2(1 << 62)
	if err != nil || n != c.Info.MaxPersistingL2 {
		t.Fatalf("SetPersistingL2: %d, %v; want the device's most, %d", n, err, c.Info.MaxPersistingL2)
	}
	defer func() {
		if n, err := c.SetPersistingL2(0); n != 0 || err != nil {
			t.Errorf("releasing persisting L2: %d, %v", n, err)
		}
	}()
	f, d := addConst(t, c, 256)
	for _, pdl := range []bool{false, c.Info.Major >= 9} {
		l := Launch{Grid: Dim(2), Block: Dim(128), PDL: pdl, L2Window: &L2Window{Base: d, Bytes: 4 * 256, HitRatio: 1}}
		if err := c.Launch(f, l, Args{d, uint32(256), float32(1)}); err != nil {
			t.Fatal(err)
		}
	}
	want := float32(1)
	if c.Info.Major >= 9 {
		want = 2
	}
	checkAll(t, c, d, 256, want, "after launches with an L2 window")
}

// clusterPTX writes, for each block, 1000·(blocks in its cluster) + its
// rank in the cluster.
const clusterPTX = `
.version 7.8
.target sm_90
.address_size 64

.visible .entry cluster_rank(
	.param .u64 p
)
{
	.reg .b32 %r<6>;
	.reg .b64 %rd<5>;
	ld.param.u64 %rd1, [p];
	mov.u32 %r1, %ctaid.x;
	mov.u32 %r2, %cluster_ctarank;
	mov.u32 %r3, %cluster_nctarank;
	mad.lo.s32 %r4, %r3, 1000, %r2;
	cvta.to.global.u64 %rd2, %rd1;
	mul.wide.u32 %rd3, %r1, 4;
	add.s64 %rd4, %rd2, %rd3;
	st.global.u32 [%rd4], %r4;
	ret;
}
`

func TestLaunchCluster(t *testing.T) {
	c := openOrSkip(t)
	if c.Info.Major < 9 {
		t.Skipf("clusters need sm_90, device is sm_%d%d", c.Info.Major, c.Info.Minor)
	}
	m, err := c.LoadModule("cluster", []byte(clusterPTX))
	if err != nil {
		t.Fatal(err)
	}
	defer m.Unload()
	f, err := m.Function("cluster_rank")
	if err != nil {
		t.Fatal(err)
	}
	const blocks = 16
	d, err := c.Alloc(4 * blocks)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Free(d)
	for _, tc := range []struct {
		size int
		pdl  bool
	}{{4, false}, {8, true}, {2, true}} {
		if err := c.MemsetD32(d, 0, blocks); err != nil {
			t.Fatal(err)
		}
		l := Launch{Grid: Dim(blocks), Block: Dim(32), Cluster: Dim(tc.size), PDL: tc.pdl}
		if err := c.Launch(f, l, Args{d}); err != nil {
			t.Fatal(err)
		}
		if err := c.Synchronize(); err != nil {
			t.Fatal(err)
		}
		buf := make([]byte, 4*blocks)
		if err := c.CopyDtoH(buf, d); err != nil {
			t.Fatal(err)
		}
		for i := 0; i < blocks; i++ {
			got, want := binary.LittleEndian.Uint32(buf[4*i:]), uint32(1000*tc.size+i%tc.size)
			if got != want {
				t.Fatalf("clusters of %d (PDL %v): block %d wrote %d, want %d", tc.size, tc.pdl, i, got, want)
			}
		}
	}
	if err := c.Launch(f, Launch{Grid: Dim(blocks), Block: Dim(32), Cluster: Dim(3)}, Args{d}); err == nil {
		t.Error("a cluster that does not divide the grid was accepted")
	}
}

func TestBadPTXReportsLog(t *testing.T) {
	c := openOrSkip(t)
	bad := strings.Replace(addPTX, "add.f32 %f2, %f1, %f3;", "add.f32 %f2, %f1, %f99;", 1)
	_, err := c.LoadModule("bad", []byte(bad))
	if err == nil {
		t.Fatal("loading broken PTX succeeded")
	}
	var e *Error
	if !asError(err, &e) || e.Log == "" {
		t.Errorf("error carries no JIT log: %v", err)
	}
	t.Logf("as reported: %v", err)
}

func TestAllocErrorsNameTheCall(t *testing.T) {
	c := openOrSkip(t)
	_, err := c.Alloc(1 << 62)
	if err == nil || !strings.Contains(err.Error(), "cuMemAlloc") {
		t.Errorf("huge allocation: %v, want an error naming cuMemAlloc", err)
	}
}

func asError(err error, e **Error) bool { return errors.As(err, e) }

// TestWaitEvent orders a copy on one stream after a slow fill on another
// through an event: without the wait the copy would run while the fill
// (64 passes over 256 MB first) is still going and read the old word.
func TestWaitEvent(t *testing.T) {
	c := openOrSkip(t)
	const big = 256 << 20
	buf, err := c.Alloc(big)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Free(buf)
	out, err := c.Alloc(4)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Free(out)
	var s [2]Stream
	for i := range s {
		if s[i], err = c.NewStream(); err != nil {
			t.Fatal(err)
		}
		defer c.DestroyStream(s[i])
	}
	e, err := c.NewSyncEvent()
	if err != nil {
		t.Fatal(err)
	}
	defer c.DestroyEvent(e)
	for round := range 3 {
		if err := c.MemsetD32(buf, 0, 1); err != nil {
			t.Fatal(err)
		}
		for range 64 {
			if err := c.MemsetD32Async(buf, 1, big/4, s[0]); err != nil {
				t.Fatal(err)
			}
		}
		if err := c.MemsetD32Async(buf, uint32(7+round), 1, s[0]); err != nil {
			t.Fatal(err)
		}
		if err := c.Record(e, s[0]); err != nil {
			t.Fatal(err)
		}
		if err := c.WaitEvent(s[1], e); err != nil {
			t.Fatal(err)
		}
		if err := c.CopyDtoDAsync(out, buf, 4, s[1]); err != nil {
			t.Fatal(err)
		}
		if err := c.SyncStream(s[1]); err != nil {
			t.Fatal(err)
		}
		word := make([]byte, 4)
		if err := c.CopyDtoH(word, out); err != nil {
			t.Fatal(err)
		}
		if v := binary.LittleEndian.Uint32(word); v != uint32(7+round) {
			t.Fatalf("round %d: the copy after the event read %d, want %d", round, v, 7+round)
		}
		if err := c.SyncStream(s[0]); err != nil {
			t.Fatal(err)
		}
	}
}
