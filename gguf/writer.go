package gguf

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"

	"gotok/quant"
)

// Writer builds a GGUF v3 file: metadata in insertion order, then tensors in
// insertion order, each aligned. The layout is llama.cpp's: every tensor's
// data, the last included, is zero-padded to the alignment, so a file read
// from llama.cpp and written back is byte-identical.
type Writer struct {
	meta    Metadata
	tensors []TensorInfo
	offset  uint64 // next tensor's offset in the data section
	err     error  // first error; reported by WriteTo
}

// NewWriter returns an empty writer.
func NewWriter() *Writer { return &Writer{} }

func (w *Writer) fail(err error) {
	if w.err == nil {
		w.err = err
	}
}

// Set stores key = x (see ValueOf for accepted types). Errors are kept and
// returned by WriteTo / WriteFile.
func (w *Writer) Set(key string, x any) {
	v, err := ValueOf(x)
	if err != nil {
		w.fail(fmt.Errorf("gguf: metadata %q: %w", key, err))
		return
	}
	if key == "general.alignment" {
		// Tensor offsets are fixed by AddTensor, so the alignment may not
		// change once a tensor is in (setting the same value is harmless).
		a, ok := v.v.(uint32)
		if !ok || a == 0 || a&(a-1) != 0 || len(w.tensors) > 0 && uint64(a) != w.alignment() {
			w.fail(fmt.Errorf("gguf: general.alignment must be a uint32 power of two set before any tensor, got %v", x))
			return
		}
	}
	w.meta.set(key, v)
}

// CopyMetadata copies every key of m (e.g. a file being converted), with the
// same checks as Set.
func (w *Writer) CopyMetadata(m *Metadata) {
	for _, k := range m.keys {
		w.Set(k, m.values[k])
	}
}

func (w *Writer) alignment() uint64 {
	if a, ok := w.meta.values["general.alignment"].v.(uint32); ok {
		return uint64(a)
	}
	return DefaultAlignment
}

// AddTensor appends a tensor. shape is in ggml order (shape[0] = row length);
// data must hold exactly the tensor's bytes. The writer keeps data, not a copy.
func (w *Writer) AddTensor(name string, t quant.Type, shape []uint64, data []byte) {
	if len(shape) == 0 || len(shape) > maxDims {
		w.fail(fmt.Errorf("gguf: tensor %q: %d dimensions", name, len(shape)))
		return
	}
	elems := uint64(1)
	for _, d := range shape {
		if d == 0 || d > math.MaxInt64/elems {
			w.fail(fmt.Errorf("gguf: tensor %q: bad shape %v", name, shape))
			return
		}
		elems *= d
	}
	size, err := t.RowBytes(elems)
	if err == nil && shape[0]%uint64(t.BlockSize()) != 0 {
		err = fmt.Errorf("row length %d is not a multiple of the %s block size", shape[0], t)
	}
	if err != nil {
		w.fail(fmt.Errorf("gguf: tensor %q: %w", name, err))
		return
	}
	if uint64(len(data)) != size {
		w.fail(fmt.Errorf("gguf: tensor %q: %d bytes of data, shape %v of %s needs %d", name, len(data), shape, t, size))
		return
	}
	for _, o := range w.tensors {
		if o.Name == name {
			w.fail(fmt.Errorf("gguf: duplicate tensor %q", name))
			return
		}
	}
	w.offset = alignUp(w.offset, w.alignment())
	w.tensors = append(w.tensors, TensorInfo{Name: name, Type: t, Shape: append([]uint64(nil), shape...), Offset: w.offset, Size: size, Data: data})
	w.offset += size
}

// WriteTo writes the file.
func (w *Writer) WriteTo(out io.Writer) (int64, error) {
	if w.err != nil {
		return 0, w.err
	}
	cw := &countWriter{w: bufio.NewWriterSize(out, 1<<20)}
	e := &encoder{w: cw}
	e.bytes([]byte(Magic))
	e.u32(3)
	e.u64(uint64(len(w.tensors)))
	e.u64(uint64(len(w.meta.keys)))
	for _, k := range w.meta.keys {
		e.str(k)
		v := w.meta.values[k]
		e.u32(uint32(v.Type))
		e.value(v)
	}
	for _, t := range w.tensors {
		e.str(t.Name)
		e.u32(uint32(len(t.Shape)))
		for _, d := range t.Shape {
			e.u64(d)
		}
		e.u32(uint32(t.Type))
		e.u64(t.Offset)
	}
	align := w.alignment()
	e.pad(align)
	base := cw.n
	for _, t := range w.tensors {
		e.zeros(base + int64(t.Offset) - cw.n)
		e.bytes(t.Data)
	}
	// llama.cpp pads after every tensor, and its non-mmap loader reads the
	// padded size of the last one too, so the file must end aligned.
	e.pad(align)
	if e.err == nil {
		e.err = cw.w.(*bufio.Writer).Flush()
	}
	return cw.n, e.err
}

// WriteFile writes the file to path atomically: to a temporary file in the
// same directory, renamed into place only once complete, so a failure never
// leaves a half-written model behind.
func (w *Writer) WriteFile(path string) error {
	if w.err != nil {
		return w.err
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp*")
	if err != nil {
		return fmt.Errorf("gguf: %w", err)
	}
	defer os.Remove(tmp.Name()) // no-op after a successful rename
	if _, err := w.WriteTo(tmp); err != nil {
		tmp.Close()
		return fmt.Errorf("gguf: write %s: %w", path, err)
	}
	// CreateTemp makes the file 0600; a model is an ordinary file. Sync
	// before the rename so a crash cannot leave a renamed but empty file.
	if err := tmp.Chmod(0o644); err != nil {
		tmp.Close()
		return fmt.Errorf("gguf: write %s: %w", path, err)
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return fmt.Errorf("gguf: write %s: %w", path, err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("gguf: write %s: %w", path, err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("gguf: %w", err)
	}
	return nil
}

type countWriter struct {
	w io.Writer
	n int64
}

func (c *countWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}

type encoder struct {
	w   *countWriter
	err error
	buf [8]byte
}

func (e *encoder) bytes(b []byte) {
	if e.err == nil {
		_, e.err = e.w.Write(b)
	}
}

func (e *encoder) u8(x uint8) { e.buf[0] = x; e.bytes(e.buf[:1]) }
func (e *encoder) u16(x uint16) {
	binary.LittleEndian.PutUint16(e.buf[:], x)
	e.bytes(e.buf[:2])
}
func (e *encoder) u32(x uint32) {
	binary.LittleEndian.PutUint32(e.buf[:], x)
	e.bytes(e.buf[:4])
}
func (e *encoder) u64(x uint64) {
	binary.LittleEndian.PutUint64(e.buf[:], x)
	e.bytes(e.buf[:8])
}
func (e *encoder) str(s string) { e.u64(uint64(len(s))); e.bytes([]byte(s)) }

func (e *encoder) zeros(n int64) {
	var z [64]byte
	for n > 0 {
		k := min(n, int64(len(z)))
		e.bytes(z[:k])
		n -= k
	}
}

func (e *encoder) pad(align uint64) {
	e.zeros(int64(alignUp(uint64(e.w.n), align)) - e.w.n)
}

func b2u(b bool) uint8 {
	if b {
		return 1
	}
	return 0
}

func (e *encoder) value(v Value) {
	switch x := v.v.(type) {
	case uint8:
		e.u8(x)
	case int8:
		e.u8(uint8(x))
	case uint16:
		e.u16(x)
	case int16:
		e.u16(uint16(x))
	case uint32:
		e.u32(x)
	case int32:
		e.u32(uint32(x))
	case float32:
		e.u32(math.Float32bits(x))
	case bool:
		e.u8(b2u(x))
	case string:
		e.str(x)
	case uint64:
		e.u64(x)
	case int64:
		e.u64(uint64(x))
	case float64:
		e.u64(math.Float64bits(x))
	default:
		e.array(v)
	}
}

func (e *encoder) array(v Value) {
	e.u32(uint32(v.ElemType))
	e.u64(uint64(v.Len()))
	switch a := v.v.(type) {
	case []uint8:
		e.bytes(a)
	case []int8:
		for _, x := range a {
			e.u8(uint8(x))
		}
	case []uint16:
		for _, x := range a {
			e.u16(x)
		}
	case []int16:
		for _, x := range a {
			e.u16(uint16(x))
		}
	case []uint32:
		for _, x := range a {
			e.u32(x)
		}
	case []int32:
		for _, x := range a {
			e.u32(uint32(x))
		}
	case []float32:
		for _, x := range a {
			e.u32(math.Float32bits(x))
		}
	case []bool:
		for _, x := range a {
			e.u8(b2u(x))
		}
	case []string:
		for _, x := range a {
			e.str(x)
		}
	case []uint64:
		for _, x := range a {
			e.u64(x)
		}
	case []int64:
		for _, x := range a {
			e.u64(uint64(x))
		}
	case []float64:
		for _, x := range a {
			e.u64(math.Float64bits(x))
		}
	case []Value:
		for _, x := range a {
			e.array(x)
		}
	}
}
