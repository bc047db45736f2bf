package backend

import (
	"math"
	"strings"
	"testing"

	"gotok/model"
)

func TestCheckInput(t *testing.T) {
	ok := []struct {
		tokens []int32
		pos    int
	}{{[]int32{0}, 0}, {[]int32{7, 7}, 14}, {[]int32{3}, 15}}
	for _, c := range ok {
		if err := CheckInput(c.tokens, c.pos, 16, 8); err != nil {
			t.Errorf("CheckInput(%v, %d): %v", c.tokens, c.pos, err)
		}
	}
	bad := []struct {
		tokens []int32
		pos    int
	}{
		{nil, 0}, {[]int32{}, 3},
		{[]int32{1}, 16}, {[]int32{1, 1}, 15}, {[]int32{1}, -1},
		{[]int32{1}, math.MaxInt}, {[]int32{1, 2}, math.MaxInt - 1}, // would overflow pos+len
		{[]int32{8}, 0}, {[]int32{-1}, 0}, {[]int32{1, 2, 99}, 0},
	}
	for _, c := range bad {
		if err := CheckInput(c.tokens, c.pos, 16, 8); err == nil {
			t.Errorf("CheckInput(%v, %d): no error", c.tokens, c.pos)
		}
	}
}

func TestContextLen(t *testing.T) {
	c := &model.Config{ContextLen: 8192, NumLayers: 30, NumKVHeads: 3, HeadDim: 64}
	if n, err := ContextLen(0, c); n != DefaultMaxContext || err != nil {
		t.Errorf("default: %d, %v", n, err)
	}
	if n, err := ContextLen(100, c); n != 100 || err != nil {
		t.Errorf("requested: %d, %v", n, err)
	}
	if _, err := ContextLen(1<<22, c); err == nil { // 4M tokens: 185 GiB of KV cache
		t.Error("huge context: no error")
	}
	if _, err := ContextLen(1<<62, c); err == nil || !strings.Contains(err.Error(), "too large") {
		t.Errorf("absurd context: %v", err) // must not overflow into a small KV size
	}
	if _, err := ContextLen(0, &model.Config{NumLayers: 1, NumKVHeads: 1, HeadDim: 2}); err == nil {
		t.Error("model context 0: no error")
	}
	// 500,000 tokens of this model: 21.5 GiB in float32, 10.7 in float16.
	if _, err := ContextLenKV(500_000, c, 4); err == nil {
		t.Error("500,000 tokens, float32: no error")
	}
	if n, err := ContextLenKV(500_000, c, 2); n != 500_000 || err != nil {
		t.Errorf("500,000 tokens, float16: %d, %v", n, err)
	}
}
