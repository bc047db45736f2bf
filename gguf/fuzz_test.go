package gguf_test

import (
	"bytes"
	"errors"
	"testing"

	"gotok/gguf"
)

// FuzzParse feeds arbitrary bytes to Parse. Seeds live in
// testdata/fuzz/FuzzParse (small files from the Writer, some broken); run
// with go test ./gguf -run='^$' -fuzz=FuzzParse.
//
// Properties: Parse never panics; it fails only with ErrFormat; on success
// every tensor's Data is a view of the input of Size bytes at its offset; and
// whatever Parse accepts the Writer writes back to a file that parses to the
// same content and is a fixed point of writing.
func FuzzParse(f *testing.F) {
	f.Fuzz(func(t *testing.T, data []byte) {
		file, err := gguf.Parse(data)
		if err != nil {
			if !errors.Is(err, gguf.ErrFormat) {
				t.Fatalf("error %v does not wrap ErrFormat", err)
			}
			return
		}
		if file.Alignment == 0 || file.Alignment&(file.Alignment-1) != 0 || file.DataOffset%file.Alignment != 0 && file.DataOffset != uint64(len(data)) {
			t.Fatalf("alignment %d, data offset %d", file.Alignment, file.DataOffset)
		}
		for _, ti := range file.Tensors {
			start := file.DataOffset + ti.Offset
			if uint64(len(ti.Data)) != ti.Size || ti.Size == 0 || start < file.DataOffset || start+ti.Size > uint64(len(data)) || start+ti.Size < start {
				t.Fatalf("tensor %q: %d bytes of data, size %d at file offset %d of %d", ti.Name, len(ti.Data), ti.Size, start, len(data))
			}
			if &ti.Data[0] != &data[start] || cap(ti.Data) != len(ti.Data) {
				t.Fatalf("tensor %q data is not a capped view of the input at %d", ti.Name, start)
			}
			if want, err := ti.Type.RowBytes(ti.Elements()); err != nil || want != ti.Size {
				t.Fatalf("tensor %q: size %d, %s × %d elements is %d (%v)", ti.Name, ti.Size, ti.Type, ti.Elements(), want, err)
			}
			if ti.Offset%file.Alignment != 0 {
				t.Fatalf("tensor %q offset %d misaligned", ti.Name, ti.Offset)
			}
		}

		// A legal alignment of up to 2^31 makes the writer pad the header
		// to that size (llama.cpp's layout) while a tensor-free input needs
		// no padding to parse: 57 bytes would rewrite to 2 GiB.
		if file.Alignment > 1<<16 {
			return
		}
		out := rewrite(t, file)
		again, err := gguf.Parse(out)
		if err != nil {
			t.Fatalf("the writer's copy of an accepted file does not parse: %v", err)
		}
		if d := sameFile(file, again); d != "" {
			t.Fatalf("the writer's copy differs: %s", d)
		}
		if out2 := rewrite(t, again); !bytes.Equal(out, out2) {
			t.Fatal("writing a file the writer produced changed it")
		}
	})
}
