package server

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"time"

	"gotok"
)

// checkModel accepts the served model's id, or none.
func (s *Server) checkModel(name string) error {
	if name != "" && name != s.o.ModelName {
		return withCode(&apiError{Status: http.StatusNotFound, Type: typeNotFound,
			Message: "model " + quote(name) + " does not exist: this server serves " + quote(s.o.ModelName)}, "model_not_found")
	}
	return nil
}

func quote(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// requestContext bounds a request by the server's timeout.
func (s *Server) requestContext(r *http.Request) (context.Context, context.CancelFunc) {
	return context.WithTimeout(r.Context(), s.o.RequestTimeout)
}

func (s *Server) handleChat(w http.ResponseWriter, r *http.Request) error {
	start := time.Now()
	req, err := decodeChatRequest(r.Body)
	if err != nil {
		return err
	}
	if err := s.checkModel(req.Model); err != nil {
		return err
	}
	lp := logprobRequest{want: req.Logprobs != nil && *req.Logprobs}
	if req.TopLogprobs != nil {
		lp.top = *req.TopLogprobs
	}
	maxTokens := req.maxTokens()
	opts, err := generateOptions(&req.samplingRequest, lp, maxTokens, s.model.ContextLen())
	if err != nil {
		return err
	}
	text, stops, err := s.prompts.render(req.chatMessages())
	if err != nil {
		return err
	}
	opts.Stop = append(append([]string(nil), opts.Stop...), stops...)
	prompt, err := s.encode("messages", text, opts)
	if err != nil {
		return err
	}
	if err := s.checkContext("messages", len(prompt), maxTokens); err != nil {
		return err
	}
	j := job{start: start, prompt: prompt, opts: opts}
	tok := s.model.Tokenizer()
	return s.generate(w, r, j, req.Stream, "chatcmpl-", func(id string, created int64) *reply {
		chunk := func(d chatDelta, finish *string) chatChunk {
			return chatChunk{ID: id, Object: "chat.completion.chunk", Created: created, Model: s.o.ModelName,
				Choices: []chatChunkChoice{{Delta: d, FinishReason: finish}}}
		}
		var out strings.Builder
		var lps *chatLogprobs
		if opts.Logprobs {
			lps = &chatLogprobs{Content: []tokenLogprob{}}
		}
		return &reply{
			collect: func(t gotok.Token) {
				out.WriteString(t.Text)
				if lps != nil && t.ID >= 0 {
					lps.Content = append(lps.Content, chatLogprob(tok, t))
				}
			},
			whole: func(st gotok.Stats) any {
				return chatCompletion{
					ID: id, Object: "chat.completion", Created: created, Model: s.o.ModelName,
					Choices: []chatChoice{{Message: assistantMessage{Role: "assistant", Content: out.String()}, Logprobs: lps, FinishReason: finishReason(st.StopReason)}},
					Usage:   usageOf(st),
				}
			},
			head: chunk(chatDelta{Role: "assistant"}, nil),
			event: func(t gotok.Token) (any, bool) {
				// With logprobs every token has its chunk, even one whose
				// text is still incomplete; without, only text goes out.
				if t.Text == "" && (!opts.Logprobs || t.ID < 0) {
					return nil, false
				}
				c := chunk(chatDelta{Content: t.Text}, nil)
				if opts.Logprobs && t.ID >= 0 {
					c.Choices[0].Logprobs = &chatLogprobs{Content: []tokenLogprob{chatLogprob(tok, t)}}
				}
				return c, true
			},
			finish: func(reason string) any { return chunk(chatDelta{}, &reason) },
			usage: func(u *usage) any {
				if req.StreamOptions == nil || !req.StreamOptions.IncludeUsage {
					return nil
				}
				return chatChunk{ID: id, Object: "chat.completion.chunk", Created: created, Model: s.o.ModelName,
					Choices: []chatChunkChoice{}, Usage: u}
			},
		}
	})
}

// reply is what an endpoint makes of a generation: a whole response
// (collect each token, then whole), or a stream of events (head first
// when not nil, one per token that event accepts, finish, usage when not
// nil). With prompt set, the prompt is scored first, in the engine's
// turn: prompt collects its log-probabilities, and in a stream returns
// the event that carries them (after head).
type reply struct {
	prompt  func(scored []gotok.Token) any
	collect func(t gotok.Token)
	whole   func(st gotok.Stats) any

	head   any
	event  func(t gotok.Token) (any, bool)
	finish func(reason string) any
	usage  func(u *usage) any
}

// generate runs j for a request, admitted by the scheduler, and answers
// with the reply newReply builds for the response's id and creation time:
// whole, or streamed as server-sent events ending with [DONE] (an error
// once the stream has begun goes out as an error event).
func (s *Server) generate(w http.ResponseWriter, r *http.Request, j job, stream bool, idPrefix string, newReply func(id string, created int64) *reply) error {
	ctx, cancel := s.requestContext(r)
	defer cancel()
	release, err := s.admit(ctx, w)
	if err != nil {
		return err
	}
	defer release()
	id, created := newID(idPrefix), time.Now().Unix()
	infoOf(ctx).stream, infoOf(ctx).id = stream, id
	rp := newReply(id, created)
	var prompt func([]gotok.Token) error
	if !stream {
		if rp.prompt != nil {
			prompt = func(scored []gotok.Token) error { rp.prompt(scored); return nil }
		}
		st, err := s.run(ctx, j, prompt, func(t gotok.Token) error {
			rp.collect(t)
			return nil
		})
		if err != nil {
			return err
		}
		return writeJSON(w, rp.whole(st))
	}
	ev := startSSE(w)
	if rp.head != nil {
		if err := ev.send(rp.head); err != nil {
			return nil // the client left
		}
	}
	if rp.prompt != nil {
		prompt = func(scored []gotok.Token) error { return ev.send(rp.prompt(scored)) }
	}
	st, err := s.run(ctx, j, prompt, func(t gotok.Token) error {
		if e, ok := rp.event(t); ok {
			return ev.send(e)
		}
		return nil
	})
	if err != nil {
		infoOf(ctx).err = err
		ev.fail(err)
		return nil
	}
	ev.send(rp.finish(finishReason(st.StopReason)))
	if u := rp.usage(usageOf(st)); u != nil {
		ev.send(u)
	}
	ev.done()
	return nil
}

// encode tokenizes a prompt as the engine does (an empty one is BOS
// alone), refusing one that comes out empty: the model has no BOS.
func (s *Server) encode(param, text string, o gotok.GenerateOptions) ([]int32, error) {
	tokens := s.model.PromptTokens(text, o)
	if len(tokens) == 0 {
		return nil, invalid(param, "the prompt is empty, and this model has no BOS token to start from")
	}
	return tokens, nil
}

// promptIDs checks token ids from a request against the vocabulary.
func (s *Server) promptIDs(param string, ids []int64) ([]int32, error) {
	vocab := s.model.Tokenizer().VocabSize()
	out := make([]int32, len(ids))
	for i, id := range ids {
		if id < 0 || id >= int64(vocab) {
			return nil, invalid(param, "token id %d at %d is outside the vocabulary (0 to %d)", id, i, vocab-1)
		}
		out[i] = int32(id)
	}
	return out, nil
}

func (s *Server) handleCompletion(w http.ResponseWriter, r *http.Request) error {
	start := time.Now()
	req, err := decodeCompletionRequest(r.Body)
	if err != nil {
		return err
	}
	if err := s.checkModel(req.Model); err != nil {
		return err
	}
	var lp logprobRequest
	if req.Logprobs != nil {
		lp = logprobRequest{want: true, top: *req.Logprobs}
	}
	maxTokens := req.maxTokens()
	if req.MaxTokens == nil && req.MaxCompletionTokens == nil {
		maxTokens = 16 // OpenAI's default for completions
	}
	opts, err := generateOptions(&req.samplingRequest, lp, maxTokens, s.model.ContextLen())
	if err != nil {
		return err
	}
	var prompt []int32
	echo := ""
	if req.Prompt.isIDs {
		if len(req.Prompt.tokens) == 0 {
			return invalid("prompt", "prompt is an empty list of tokens")
		}
		if prompt, err = s.promptIDs("prompt", req.Prompt.tokens); err != nil {
			return err
		}
		if req.Echo {
			echo = s.model.Tokenizer().Decode(prompt)
		}
	} else {
		if prompt, err = s.encode("prompt", req.Prompt.text, opts); err != nil {
			return err
		}
		echo = req.Prompt.text
	}
	if !req.Echo {
		echo = ""
	}
	if err := s.checkContext("prompt", len(prompt), maxTokens); err != nil {
		return err
	}
	j := job{start: start, prompt: prompt, opts: opts}
	tok := s.model.Tokenizer()
	return s.generate(w, r, j, req.Stream, "cmpl-", func(id string, created int64) *reply {
		chunk := func(text string, finish *string) textCompletion {
			return textCompletion{ID: id, Object: "text_completion", Created: created, Model: s.o.ModelName,
				Choices: []textChoice{{Text: text, FinishReason: finish}}}
		}
		var out strings.Builder
		out.WriteString(echo)
		var lps *completionLogprobs
		if opts.Logprobs {
			lps = &completionLogprobs{}
		}
		// A token's offset counts the pieces before it, not the text
		// emitted so far: the engine holds text back (an incomplete
		// character, a possible stop string) and emits it with a later
		// token. A control token's piece is not in the text (its
		// OutputPiece is empty).
		offset := len(echo)
		rp := &reply{
			collect: func(t gotok.Token) {
				if lps != nil && t.ID >= 0 {
					lps.add(tok, t, offset)
					offset += len(tok.OutputPiece(t.ID, false))
				}
				out.WriteString(t.Text)
			},
			whole: func(st gotok.Stats) any {
				reason := finishReason(st.StopReason)
				return textCompletion{
					ID: id, Object: "text_completion", Created: created, Model: s.o.ModelName,
					Choices: []textChoice{{Text: out.String(), Logprobs: lps, FinishReason: &reason}}, Usage: usageOf(st),
				}
			},
			event: func(t gotok.Token) (any, bool) {
				if t.Text == "" && (!opts.Logprobs || t.ID < 0) {
					return nil, false
				}
				c := chunk(t.Text, nil)
				if opts.Logprobs && t.ID >= 0 {
					lps := &completionLogprobs{}
					lps.add(tok, t, offset)
					c.Choices[0].Logprobs = lps
					offset += len(tok.OutputPiece(t.ID, false))
				}
				return c, true
			},
			finish: func(reason string) any { return chunk("", &reason) },
			usage: func(u *usage) any {
				if req.StreamOptions == nil || !req.StreamOptions.IncludeUsage {
					return nil
				}
				return textCompletion{ID: id, Object: "text_completion", Created: created, Model: s.o.ModelName,
					Choices: []textChoice{}, Usage: u}
			},
		}
		if req.Echo && opts.Logprobs {
			// The echo's entries come first: the prompt's tokens, scored.
			rp.prompt = func(scored []gotok.Token) any {
				if !req.Stream {
					lps.addPrompt(tok, prompt[0], scored)
					return nil
				}
				c := chunk(echo, nil)
				c.Choices[0].Logprobs = &completionLogprobs{}
				c.Choices[0].Logprobs.addPrompt(tok, prompt[0], scored)
				return c
			}
		} else if echo != "" {
			rp.head = chunk(echo, nil)
		}
		return rp
	})
}

func (s *Server) handleModels(w http.ResponseWriter, r *http.Request) error {
	return writeJSON(w, modelList{Object: "list", Data: []modelCard{{
		ID: s.o.ModelName, Object: "model", Created: s.created, OwnedBy: "gotok", MaxModelLen: s.model.ContextLen(),
	}}})
}

// tokenizeRequest is vLLM's /tokenize body: a prompt, or chat messages
// written with the chat template.
type tokenizeRequest struct {
	Model            string        `json:"model"`
	Prompt           *string       `json:"prompt"`
	Messages         []chatMessage `json:"messages"`
	AddSpecialTokens *bool         `json:"add_special_tokens"`
}

type tokenizeResponse struct {
	Tokens      []int32 `json:"tokens"`
	Count       int     `json:"count"`
	MaxModelLen int     `json:"max_model_len"`
}

func (s *Server) handleTokenize(w http.ResponseWriter, r *http.Request) error {
	var req tokenizeRequest
	if err := decodeJSON(r.Body, &req); err != nil {
		return err
	}
	if err := s.checkModel(req.Model); err != nil {
		return err
	}
	opts := gotok.GenerateOptions{ParseSpecial: true}
	if req.AddSpecialTokens != nil && !*req.AddSpecialTokens {
		opts.NoSpecial = true
	}
	var text string
	switch {
	case req.Prompt != nil && req.Messages != nil:
		return invalid("prompt", "send prompt or messages, not both")
	case req.Prompt != nil:
		text = *req.Prompt
	case len(req.Messages) > 0:
		cr := chatRequest{Messages: req.Messages}
		for i, m := range req.Messages {
			if m.Content.err != nil {
				return invalid("messages", "messages[%d]: %v", i, m.Content.err)
			}
		}
		t, _, err := s.prompts.render(cr.chatMessages())
		if err != nil {
			return err
		}
		text = t
	default:
		return invalid("prompt", "send prompt (a string) or messages")
	}
	tokens := s.model.Encode(text, opts)
	if tokens == nil {
		tokens = []int32{}
	}
	return writeJSON(w, tokenizeResponse{Tokens: tokens, Count: len(tokens), MaxModelLen: s.model.ContextLen()})
}

type detokenizeRequest struct {
	Model  string  `json:"model"`
	Tokens []int64 `json:"tokens"`
}

func (s *Server) handleDetokenize(w http.ResponseWriter, r *http.Request) error {
	var req detokenizeRequest
	if err := decodeJSON(r.Body, &req); err != nil {
		return err
	}
	if err := s.checkModel(req.Model); err != nil {
		return err
	}
	ids, err := s.promptIDs("tokens", req.Tokens)
	if err != nil {
		return err
	}
	return writeJSON(w, struct {
		Prompt string `json:"prompt"`
	}{s.model.Tokenizer().Decode(ids)})
}

func writeJSON(w http.ResponseWriter, v any) error {
	data, err := json.Marshal(v)
	if err != nil {
		return &encodeError{err}
	}
	w.Header().Set("Content-Type", "application/json")
	_, err = w.Write(append(data, '\n'))
	return err
}
