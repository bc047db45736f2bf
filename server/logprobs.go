package server

import (
	"math"

	"gotok"
	"gotok/tokenizer"
)

// chatLogprobs is a chat choice's "logprobs": one entry per generated
// token.
type chatLogprobs struct {
	Content []tokenLogprob `json:"content"`
	Refusal *string        `json:"refusal"`
}

type tokenLogprob struct {
	Token       string       `json:"token"`
	Logprob     float32      `json:"logprob"`
	Bytes       []int        `json:"bytes"`
	TopLogprobs []topLogprob `json:"top_logprobs"`
}

type topLogprob struct {
	Token   string  `json:"token"`
	Logprob float32 `json:"logprob"`
	Bytes   []int   `json:"bytes"`
}

// chatLogprob is t's entry: the token's piece (its raw bytes, which may be
// part of a character; "bytes" has them exactly) and its alternatives.
func chatLogprob(tok *tokenizer.Tokenizer, t gotok.Token) tokenLogprob {
	piece := tok.Piece(t.ID)
	e := tokenLogprob{Token: piece, Logprob: finite(t.Logprob), Bytes: byteList(piece), TopLogprobs: []topLogprob{}}
	for _, alt := range t.Top {
		e.TopLogprobs = append(e.TopLogprobs, topLogprob{Token: alt.Text, Logprob: finite(alt.Logprob), Bytes: byteList(alt.Text)})
	}
	return e
}

func byteList(s string) []int {
	b := make([]int, len(s))
	for i := range len(s) {
		b[i] = int(s[i])
	}
	return b
}

// completionLogprobs is a text completion choice's "logprobs", in the
// older completions shape: parallel lists, one entry per token. An echoed
// prompt's first token has null log-probabilities: nothing predicts it.
type completionLogprobs struct {
	Tokens        []string             `json:"tokens"`
	TokenLogprobs []*float32           `json:"token_logprobs"`
	TopLogprobs   []map[string]float32 `json:"top_logprobs"`
	TextOffset    []int                `json:"text_offset"`
}

// addPrompt appends the entries of an echoed prompt: its first token
// (null log-probabilities), then scored, Model.PromptLogprobs of the rest.
// Offsets count the pieces from 0; it returns the offset after them.
func (c *completionLogprobs) addPrompt(tok *tokenizer.Tokenizer, first int32, scored []gotok.Token) int {
	c.Tokens = append(c.Tokens, tok.Piece(first))
	c.TokenLogprobs = append(c.TokenLogprobs, nil)
	c.TopLogprobs = append(c.TopLogprobs, nil)
	c.TextOffset = append(c.TextOffset, 0)
	offset := len(tok.Piece(first))
	for _, t := range scored {
		c.add(tok, t, offset)
		offset += len(tok.Piece(t.ID))
	}
	return offset
}

// add appends t, whose piece starts at byte offset of the choice's text.
func (c *completionLogprobs) add(tok *tokenizer.Tokenizer, t gotok.Token, offset int) {
	c.Tokens = append(c.Tokens, tok.Piece(t.ID))
	lp := finite(t.Logprob)
	c.TokenLogprobs = append(c.TokenLogprobs, &lp)
	top := make(map[string]float32, len(t.Top))
	for _, alt := range t.Top {
		if _, dup := top[alt.Text]; !dup { // two ids may share a piece: keep the likelier
			top[alt.Text] = finite(alt.Logprob)
		}
	}
	c.TopLogprobs = append(c.TopLogprobs, top)
	c.TextOffset = append(c.TextOffset, offset)
}

// minLogprob stands in for a log-probability JSON cannot carry (-Inf: a
// token the model rules out; NaN), as vLLM writes it.
const minLogprob = -9999.0

func finite(lp float32) float32 {
	if math.IsNaN(float64(lp)) || math.IsInf(float64(lp), 0) {
		return minLogprob
	}
	return lp
}
