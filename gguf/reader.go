// Package gguf reads and writes GGUF files (versions 2 and 3), the model
// format of llama.cpp: typed metadata, tensor infos, and zero-copy views of
// the tensor data through mmap.
package gguf

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"os"

	"gotok/quant"
)

// Magic is the first four bytes of every GGUF file.
const Magic = "GGUF"

// DefaultAlignment applies when general.alignment is absent.
const DefaultAlignment = 32

// maxDims is ggml's GGML_MAX_DIMS.
const maxDims = 4

// maxNesting bounds arrays of arrays so hostile files cannot exhaust the stack.
const maxNesting = 8

// maxPrealloc caps how many elements are allocated up front on the word of a
// count read from the file. Past it, slices grow as elements are actually
// parsed, so memory stays proportional to the bytes consumed and not to what
// a hostile header claims (a count that merely fits in a multi-gigabyte
// mapped file would otherwise allocate several times the file's size).
const maxPrealloc = 1 << 10

// ErrFormat is wrapped by every error about a malformed file.
var ErrFormat = errors.New("malformed gguf")

// TensorInfo describes one tensor and views its bytes.
type TensorInfo struct {
	Name string
	Type quant.Type
	// Shape is in ggml order: Shape[0] is the row length (contiguous).
	Shape []uint64
	// Offset is relative to the start of the data section.
	Offset uint64
	// Size is the tensor's byte size.
	Size uint64
	// Data views the tensor's bytes inside the mapped file; it is valid until
	// the File is closed and must not be written.
	Data []byte
}

// Elements is the product of the dimensions.
func (t *TensorInfo) Elements() uint64 {
	n := uint64(1)
	for _, d := range t.Shape {
		n *= d
	}
	return n
}

// File is an opened GGUF file.
type File struct {
	Version uint32
	Metadata
	Tensors []TensorInfo
	// Alignment of the data section and of every tensor's offset.
	Alignment uint64
	// DataOffset is the file offset of the data section.
	DataOffset uint64

	byName map[string]int
	data   []byte
	unmap  func() error
}

// Tensor looks a tensor up by name.
func (f *File) Tensor(name string) (*TensorInfo, bool) {
	i, ok := f.byName[name]
	if !ok {
		return nil, false
	}
	return &f.Tensors[i], true
}

// Size is the size of the file in bytes.
func (f *File) Size() int64 { return int64(len(f.data)) }

// Close unmaps the file. Tensor data views are invalid afterwards.
func (f *File) Close() error {
	if f.unmap == nil {
		return nil
	}
	err := f.unmap()
	f.unmap, f.data = nil, nil
	for i := range f.Tensors {
		f.Tensors[i].Data = nil
	}
	return err
}

// Open maps the file at path and parses it.
func Open(path string) (*File, error) { return open(path, mapFile) }

// OpenInMemory reads the file at path into memory of its own (on huge
// pages where the system gives them) and parses it: for weights streamed
// from memory every token, as the CPU engine's are, where a mapped file's
// 4 KiB pages cost a TLB miss each. It takes the file's size in memory at
// once, where Open's pages come and go with the page cache.
func OpenInMemory(path string) (*File, error) { return open(path, readFile) }

func open(path string, load func(*os.File, int64) ([]byte, func() error, error)) (*File, error) {
	fd, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("gguf: %w", err)
	}
	defer fd.Close()
	st, err := fd.Stat()
	if err != nil {
		return nil, fmt.Errorf("gguf: %w", err)
	}
	if !st.Mode().IsRegular() {
		return nil, fmt.Errorf("gguf: %s is not a regular file", path)
	}
	data, unmap, err := load(fd, st.Size())
	if err != nil {
		return nil, fmt.Errorf("gguf: load %s: %w", path, err)
	}
	f, err := Parse(data)
	if err != nil {
		unmap()
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	f.unmap = unmap
	return f, nil
}

// Parse parses a GGUF image held in memory. The returned File's tensor data
// views alias data.
func Parse(data []byte) (*File, error) {
	p := &parser{buf: data}
	f, err := p.file()
	if err != nil {
		return nil, fmt.Errorf("gguf: %w", err)
	}
	f.data = data
	return f, nil
}

type parser struct {
	buf []byte
	off uint64
}

func (p *parser) errorf(format string, args ...any) error {
	return fmt.Errorf("%w: at byte %d: %s", ErrFormat, p.off, fmt.Sprintf(format, args...))
}

func (p *parser) remaining() uint64 { return uint64(len(p.buf)) - p.off }

func (p *parser) take(n uint64, what string) ([]byte, error) {
	if n > p.remaining() {
		return nil, p.errorf("%s: need %d bytes, file has %d left (truncated?)", what, n, p.remaining())
	}
	b := p.buf[p.off : p.off+n]
	p.off += n
	return b, nil
}

func (p *parser) u32(what string) (uint32, error) {
	b, err := p.take(4, what)
	if err != nil {
		return 0, err
	}
	return binary.LittleEndian.Uint32(b), nil
}

func (p *parser) u64(what string) (uint64, error) {
	b, err := p.take(8, what)
	if err != nil {
		return 0, err
	}
	return binary.LittleEndian.Uint64(b), nil
}

func (p *parser) str(what string) (string, error) {
	n, err := p.u64(what + " length")
	if err != nil {
		return "", err
	}
	b, err := p.take(n, what)
	if err != nil {
		return "", err
	}
	return string(b), nil
}

func (p *parser) file() (*File, error) {
	magic, err := p.take(4, "magic")
	if err != nil {
		return nil, err
	}
	if string(magic) != Magic {
		return nil, fmt.Errorf("%w: bad magic %q, not a GGUF file", ErrFormat, magic)
	}
	version, err := p.u32("version")
	if err != nil {
		return nil, err
	}
	switch {
	case version == 1:
		return nil, fmt.Errorf("%w: GGUF version 1 is not supported (convert the file to v3)", ErrFormat)
	case version == 2 || version == 3:
	case version&0xffff == 0 && version != 0:
		return nil, fmt.Errorf("%w: version %#x looks big-endian; only little-endian GGUF is supported", ErrFormat, version)
	default:
		return nil, fmt.Errorf("%w: unsupported GGUF version %d", ErrFormat, version)
	}
	nTensors, err := p.u64("tensor count")
	if err != nil {
		return nil, err
	}
	nKV, err := p.u64("metadata count")
	if err != nil {
		return nil, err
	}
	// Every key–value needs at least 8+4+1 bytes and every tensor info at
	// least 8+4+8+4+8, so counts beyond that are lies; checking first keeps a
	// hostile header from making us allocate.
	if nKV > p.remaining()/13 {
		return nil, p.errorf("metadata count %d cannot fit in the file", nKV)
	}
	f := &File{Version: version, byName: make(map[string]int)}
	f.values = make(map[string]Value, min(nKV, maxPrealloc))
	for i := uint64(0); i < nKV; i++ {
		key, err := p.str(fmt.Sprintf("metadata key %d", i))
		if err != nil {
			return nil, err
		}
		if _, dup := f.values[key]; dup {
			return nil, p.errorf("duplicate metadata key %q", key)
		}
		t, err := p.u32("value type of " + key)
		if err != nil {
			return nil, err
		}
		v, err := p.value(ValueType(t), 0, key)
		if err != nil {
			return nil, err
		}
		f.set(key, v)
	}

	f.Alignment = DefaultAlignment
	if v, ok := f.values["general.alignment"]; ok {
		a, ok := v.v.(uint32)
		if !ok {
			return nil, fmt.Errorf("%w: general.alignment is %s, want uint32", ErrFormat, v.Type)
		}
		if a == 0 || a&(a-1) != 0 {
			return nil, fmt.Errorf("%w: general.alignment %d is not a power of two", ErrFormat, a)
		}
		f.Alignment = uint64(a)
	}

	if nTensors > p.remaining()/32 {
		return nil, p.errorf("tensor count %d cannot fit in the file", nTensors)
	}
	f.Tensors = make([]TensorInfo, 0, min(nTensors, maxPrealloc))
	for i := uint64(0); i < nTensors; i++ {
		var t TensorInfo
		if err := p.tensorInfo(&t, i); err != nil {
			return nil, err
		}
		if _, dup := f.byName[t.Name]; dup {
			return nil, p.errorf("duplicate tensor name %q", t.Name)
		}
		f.byName[t.Name] = len(f.Tensors)
		f.Tensors = append(f.Tensors, t)
	}

	f.DataOffset = alignUp(p.off, f.Alignment)
	if f.DataOffset > uint64(len(p.buf)) {
		if nTensors > 0 {
			return nil, fmt.Errorf("%w: data section starts at %d, past the end of the %d-byte file", ErrFormat, f.DataOffset, len(p.buf))
		}
		f.DataOffset = uint64(len(p.buf))
	}
	dataLen := uint64(len(p.buf)) - f.DataOffset
	for i := range f.Tensors {
		t := &f.Tensors[i]
		if t.Offset%f.Alignment != 0 {
			return nil, fmt.Errorf("%w: tensor %q offset %d is not a multiple of the alignment %d", ErrFormat, t.Name, t.Offset, f.Alignment)
		}
		if t.Offset > dataLen || t.Size > dataLen-t.Offset {
			return nil, fmt.Errorf("%w: tensor %q data [%d, +%d) runs past the end of the data section (%d bytes; truncated file?)", ErrFormat, t.Name, t.Offset, t.Size, dataLen)
		}
		start := f.DataOffset + t.Offset
		t.Data = p.buf[start : start+t.Size : start+t.Size]
	}
	return f, nil
}

func (p *parser) tensorInfo(t *TensorInfo, i uint64) error {
	name, err := p.str(fmt.Sprintf("tensor %d name", i))
	if err != nil {
		return err
	}
	t.Name = name
	nDims, err := p.u32("dimension count of " + name)
	if err != nil {
		return err
	}
	if nDims == 0 || nDims > maxDims {
		return p.errorf("tensor %q has %d dimensions (1 to %d allowed)", name, nDims, maxDims)
	}
	t.Shape = make([]uint64, nDims)
	elems := uint64(1)
	for d := range t.Shape {
		n, err := p.u64("dimension of " + name)
		if err != nil {
			return err
		}
		if n == 0 || n > math.MaxInt64/elems {
			return p.errorf("tensor %q dimension %d is %d (zero or overflowing)", name, d, n)
		}
		elems *= n
		t.Shape[d] = n
	}
	typ, err := p.u32("type of " + name)
	if err != nil {
		return err
	}
	t.Type = quant.Type(typ)
	if !t.Type.Known() {
		return p.errorf("tensor %q has unknown type id %d", name, typ)
	}
	if t.Shape[0]%uint64(t.Type.BlockSize()) != 0 {
		return p.errorf("tensor %q row length %d is not a multiple of the %s block size %d", name, t.Shape[0], t.Type, t.Type.BlockSize())
	}
	size, err := t.Type.RowBytes(elems)
	if err != nil {
		return p.errorf("tensor %q: %v", name, err)
	}
	t.Size = size
	t.Offset, err = p.u64("offset of " + name)
	return err
}

func (p *parser) value(t ValueType, depth int, key string) (Value, error) {
	if !t.valid() {
		return Value{}, p.errorf("metadata %q has unknown value type %d", key, uint32(t))
	}
	if t == TypeArray {
		return p.array(depth, key)
	}
	if t == TypeString {
		s, err := p.str("string value of " + key)
		return Value{Type: t, v: s}, err
	}
	b, err := p.take(uint64(t.size()), "value of "+key)
	if err != nil {
		return Value{}, err
	}
	return Value{Type: t, v: scalar(t, b)}, nil
}

func scalar(t ValueType, b []byte) any {
	le := binary.LittleEndian
	switch t {
	case TypeUint8:
		return b[0]
	case TypeInt8:
		return int8(b[0])
	case TypeUint16:
		return le.Uint16(b)
	case TypeInt16:
		return int16(le.Uint16(b))
	case TypeUint32:
		return le.Uint32(b)
	case TypeInt32:
		return int32(le.Uint32(b))
	case TypeFloat32:
		return math.Float32frombits(le.Uint32(b))
	case TypeBool:
		return b[0] != 0
	case TypeUint64:
		return le.Uint64(b)
	case TypeInt64:
		return int64(le.Uint64(b))
	case TypeFloat64:
		return math.Float64frombits(le.Uint64(b))
	}
	panic("gguf: scalar of non-scalar type") // unreachable: callers check
}

func (p *parser) array(depth int, key string) (Value, error) {
	if depth >= maxNesting {
		return Value{}, p.errorf("metadata %q nests arrays deeper than %d", key, maxNesting)
	}
	et32, err := p.u32("array element type of " + key)
	if err != nil {
		return Value{}, err
	}
	et := ValueType(et32)
	if !et.valid() {
		return Value{}, p.errorf("metadata %q array has unknown element type %d", key, et32)
	}
	n, err := p.u64("array length of " + key)
	if err != nil {
		return Value{}, err
	}
	minSize := uint64(et.size())
	switch et {
	case TypeString:
		minSize = 8
	case TypeArray:
		minSize = 12
	}
	if n > p.remaining()/minSize {
		return Value{}, p.errorf("metadata %q array of %d %s cannot fit in the file", key, n, et)
	}
	out := Value{Type: TypeArray, ElemType: et}
	switch et {
	case TypeString:
		a := make([]string, 0, min(n, maxPrealloc))
		for range n {
			s, err := p.str("string element of " + key)
			if err != nil {
				return Value{}, err
			}
			a = append(a, s)
		}
		out.v = a
	case TypeArray:
		a := make([]Value, 0, min(n, maxPrealloc))
		for range n {
			e, err := p.array(depth+1, key)
			if err != nil {
				return Value{}, err
			}
			a = append(a, e)
		}
		out.v = a
	default:
		b, _ := p.take(n*minSize, "array of "+key) // length checked above
		out.v = scalarSlice(et, b, int(n))
	}
	return out, nil
}

func scalarSlice(t ValueType, b []byte, n int) any {
	sz := t.size()
	switch t {
	case TypeUint8:
		return append([]uint8(nil), b...)
	case TypeInt8:
		a := make([]int8, n)
		for i := range a {
			a[i] = int8(b[i])
		}
		return a
	case TypeBool:
		a := make([]bool, n)
		for i := range a {
			a[i] = b[i] != 0
		}
		return a
	}
	le := binary.LittleEndian
	switch t {
	case TypeUint16:
		a := make([]uint16, n)
		for i := range a {
			a[i] = le.Uint16(b[i*sz:])
		}
		return a
	case TypeInt16:
		a := make([]int16, n)
		for i := range a {
			a[i] = int16(le.Uint16(b[i*sz:]))
		}
		return a
	case TypeUint32:
		a := make([]uint32, n)
		for i := range a {
			a[i] = le.Uint32(b[i*sz:])
		}
		return a
	case TypeInt32:
		a := make([]int32, n)
		for i := range a {
			a[i] = int32(le.Uint32(b[i*sz:]))
		}
		return a
	case TypeFloat32:
		a := make([]float32, n)
		for i := range a {
			a[i] = math.Float32frombits(le.Uint32(b[i*sz:]))
		}
		return a
	case TypeUint64:
		a := make([]uint64, n)
		for i := range a {
			a[i] = le.Uint64(b[i*sz:])
		}
		return a
	case TypeInt64:
		a := make([]int64, n)
		for i := range a {
			a[i] = int64(le.Uint64(b[i*sz:]))
		}
		return a
	case TypeFloat64:
		a := make([]float64, n)
		for i := range a {
			a[i] = math.Float64frombits(le.Uint64(b[i*sz:]))
		}
		return a
	}
	panic("gguf: scalarSlice of non-scalar type") // unreachable: callers check
}

func alignUp(x, a uint64) uint64 {
	if r := x % a; r != 0 {
		return x + a - r
	}
	return x
}
