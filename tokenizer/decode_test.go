package tokenizer

import (
	"math/rand/v2"
	"strings"
	"testing"
	"unicode/utf8"
)

// validUTF8Reference decodes b rune by rune, each invalid byte as U+FFFD.
func validUTF8Reference(b string) string {
	var sb strings.Builder
	for i := 0; i < len(b); {
		r, n := utf8.DecodeRuneInString(b[i:])
		if r == utf8.RuneError && n <= 1 {
			sb.WriteRune(utf8.RuneError)
			i++
			continue
		}
		sb.WriteString(b[i : i+n])
		i += n
	}
	return sb.String()
}

func TestStreamDecoder(t *testing.T) {
	tok := spmTestTokenizer(t)
	rng := rand.New(rand.NewPCG(11, 12))
	ids := make([]int32, 0, 64)
	for range 3000 {
		ids = ids[:0]
		for range rng.IntN(20) {
			switch rng.IntN(4) {
			case 0: // a byte of a valid multi-byte character, or of garbage
				for _, c := range []byte(randomText(rng, 4, true)) {
					ids = append(ids, tok.spm.byteToken[c])
				}
			case 1:
				ids = append(ids, int32(rng.IntN(tok.VocabSize())))
			default:
				ids = append(ids, tok.ids["▁ab"])
			}
		}
		special := rng.IntN(2) == 0
		d := tok.NewStreamDecoder(special)
		var got, all strings.Builder
		for _, id := range ids {
			s := d.Next(id)
			if !utf8.ValidString(s) {
				t.Fatalf("Next returned invalid UTF-8 %q for %v", s, ids)
			}
			got.WriteString(s)
			all.WriteString(tok.OutputPiece(id, special))
		}
		tail := d.Flush()
		if !utf8.ValidString(tail) {
			t.Fatalf("Flush returned invalid UTF-8 %q", tail)
		}
		got.WriteString(tail)
		if want := validUTF8Reference(all.String()); got.String() != want {
			t.Fatalf("stream %v: %q, want %q", ids, got.String(), want)
		}
		if d.Flush() != "" {
			t.Fatal("Flush did not reset the decoder")
		}
	}
}

func TestStreamDecoderHoldsSplitCharacter(t *testing.T) {
	tok := spmTestTokenizer(t)
	d := tok.NewStreamDecoder(false)
	euro := "€" // E2 82 AC
	for i := 0; i < len(euro); i++ {
		got := d.Next(tok.spm.byteToken[euro[i]])
		want := ""
		if i == len(euro)-1 {
			want = euro
		}
		if got != want {
			t.Fatalf("after byte %d: %q, want %q", i, got, want)
		}
	}
}

func TestDecodeRoundTrip(t *testing.T) {
	rng := rand.New(rand.NewPCG(13, 14))
	bpe := mustTokenizer(t, testVocab("smollm"))
	spm := spmTestTokenizer(t)
	for range 2000 {
		text := randomText(rng, 50, true)
		// Byte-level BPE sees invalid UTF-8 as U+FFFD, as llama.cpp does.
		if got := bpe.Decode(bpe.Encode(text, false, false)); got != normalizeUTF8(text) {
			t.Fatalf("BPE: Decode(Encode(%q)) = %q", text, got)
		}
		// SPM keeps bytes and drops its dummy-prefix space again. Invalid
		// UTF-8 is not kept: like llama.cpp it escapes spaces first, and a
		// stray lead byte then swallows part of a ▁.
		valid := randomText(rng, 50, false)
		if got := spm.Decode(spm.Encode(valid, false, false)); got != valid {
			t.Fatalf("SPM: Decode(Encode(%q)) = %q", valid, got)
		}
	}
}

func TestPieceOutOfRange(t *testing.T) {
	tok := spmTestTokenizer(t)
	if tok.Piece(-1) != "" || tok.Piece(int32(tok.VocabSize())) != "" {
		t.Error("Piece of an invalid id is not empty")
	}
	if got := tok.Decode([]int32{-7, 1 << 30, tok.ids["a"]}); got != "a" {
		t.Errorf("Decode with invalid ids = %q", got)
	}
	if tok.Piece(1) != "<s>" || tok.Piece(tok.ids["<0x41>"]) != "A" || tok.Piece(tok.ids["▁ab"]) != " ab" {
		t.Errorf("pieces: %q %q %q", tok.Piece(1), tok.Piece(tok.ids["<0x41>"]), tok.Piece(tok.ids["▁ab"]))
	}
}

// TestStreamDecoderSpecial checks that control and unknown tokens print as
// nothing in generated text unless special is set, as llama.cpp's
// token_to_piece does, while Piece keeps their text.
func TestStreamDecoderSpecial(t *testing.T) {
	tok := spmTestTokenizer(t)
	ids := []int32{tok.ids["▁ab"], 1, 0, tok.ids["<0x41>"], 2}
	for _, tc := range []struct {
		special bool
		want    string
	}{{false, " abA"}, {true, " ab<s><unk>A</s>"}} {
		d := tok.NewStreamDecoder(tc.special)
		var b strings.Builder
		for _, id := range ids {
			b.WriteString(d.Next(id))
		}
		b.WriteString(d.Flush())
		if b.String() != tc.want {
			t.Errorf("special=%v: %q, want %q", tc.special, b.String(), tc.want)
		}
	}
	if tok.Piece(1) != "<s>" || tok.OutputPiece(1, false) != "" || tok.OutputPiece(1, true) != "<s>" {
		t.Errorf("pieces of <s>: %q %q %q", tok.Piece(1), tok.OutputPiece(1, false), tok.OutputPiece(1, true))
	}
}
