package gotok

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"gotok/backend"
)

// engine runs the generations of a batching backend together (continuous
// batching): each step takes the next token of every decoding sequence and
// a chunk of the prompts still being read, up to stepTokens in all, so
// that a long prompt does not stall everyone's next token. Sequences keep
// their keys and values in the backend's KV pool, whose prefix cache lets
// a prompt that starts like an earlier one (a system prompt, a chat's
// earlier turns) skip that part.
//
// One goroutine (loop) owns the backend and every running generation's
// state; callers wait on their generation's token channel, and a
// generation whose caller has not taken its tokens yet sits out the
// steps until it has, so a slow reader holds back only itself (it gives
// its KV room and its sequence slot up when a waiting request needs them,
// and comes back once its caller has caught up). When the pool runs out
// mid-generation, the most recently admitted generation is preempted: its
// blocks go back (cached) and it is recomputed when there is room again.
type engine struct {
	m  *Model
	be backend.Batcher
	// maxSeqs bounds the sequences of a step, stepTokens its tokens.
	maxSeqs, stepTokens int
	// scoreRows is the most tokens a prompt being scored runs a step: 1,
	// or scoreRowsMax where the backend gives every token's logits.
	scoreRows int

	submit chan *request
	wake   chan struct{}
	quit   chan struct{}
	done   chan struct{}

	mu      sync.Mutex
	stats   EngineStats
	waiting int // submitted, not yet admitted
}

// EngineStats is what the batching engine is doing, for metrics.
type EngineStats struct {
	// Running are the generations with a sequence in the KV cache; Waiting
	// those waiting for room or a slot, or (preempted while their caller
	// was behind) for their caller to catch up.
	Running, Waiting int
	// KVBlocksUsed of KVBlocks blocks hold some sequence's tokens.
	KVBlocksUsed, KVBlocks int
	// PromptTokensReused counts prompt tokens the prefix cache saved,
	// TokensComputed the tokens run (prompts and generated); Preemptions
	// the sequences that gave their room up to others and were recomputed
	// later.
	PromptTokensReused, TokensComputed int64
	Preemptions                        int64
	Steps                              int64
}

// request is one generation on the engine, or one prompt to score
// (PromptLogprobs: score set, g nil).
type request struct {
	g      *generation
	score  *scoring
	ctx    context.Context
	cancel context.CancelCauseFunc
	tokens chan Token // to the caller; closed when the generation ends
	err    error      // set before tokens is closed

	seq *backend.Seq
	// fed are the tokens in seq; pending the tokens to run next, after
	// which the next token is sampled.
	fed, pending []int32
	promptDone   bool // the prompt has been read and a token sampled
	finished     bool
	started      time.Time
	decodeStart  time.Time
	logits       []float32 // host sampling's buffer
}

// ready reports whether r can take a step: its caller has left room in
// the buffer for a token and the closing text.
func (r *request) ready() bool { return cap(r.tokens)-len(r.tokens) >= 2 }

// tokenBuffer is how many tokens a generation may run ahead of its caller.
const tokenBuffer = 16

// scoreRowsMax is the most tokens of a prompt being scored that a step
// runs where the backend gives every token's logits: its logits buffer is
// that many rows of the vocabulary (33 MB at Llama 3's).
const scoreRowsMax = 64

func newEngine(m *Model, be backend.Batcher, maxSeqs int) *engine {
	if maxSeqs <= 0 {
		maxSeqs = defaultSequences
	}
	e := &engine{m: m, be: be, maxSeqs: maxSeqs, stepTokens: max(be.StepTokens(), maxSeqs), scoreRows: 1,
		submit: make(chan *request), wake: make(chan struct{}, 1),
		quit: make(chan struct{}), done: make(chan struct{})}
	if _, ok := be.(backend.AllLogits); ok {
		e.scoreRows = scoreRowsMax
	}
	go e.loop()
	return e
}

// close stops the loop, ending every generation with an error, and waits
// for it.
func (e *engine) close() {
	close(e.quit)
	<-e.done
}

var errClosed = errors.New("generate: the model is closed")

// generate runs one generation on the engine, passing its tokens to emit
// on the caller's goroutine.
func (e *engine) generate(ctx context.Context, prompt []int32, o GenerateOptions, emit func(Token) error) (Stats, error) {
	r := &request{tokens: make(chan Token, tokenBuffer)}
	r.ctx, r.cancel = context.WithCancelCause(ctx)
	defer r.cancel(nil)
	var emitErr error
	g, err := e.m.newGeneration(prompt, o, func(t Token) error {
		select {
		case r.tokens <- t: // the loop schedules r only with room in the buffer
			return nil
		default:
			return errors.New("generate: token buffer full")
		}
	})
	if err != nil {
		return g.st, err
	}
	r.g = g
	if err := e.enqueue(ctx, r); err != nil {
		return g.st, err
	}
	delivered := 0
	for t := range r.tokens {
		if emitErr != nil {
			continue // drain until the loop notices the cancellation
		}
		if err := ctx.Err(); err != nil {
			// Cancelled: what the loop made ahead is not delivered.
			emitErr = err
			continue
		}
		if emitErr = emit(t); emitErr != nil {
			r.cancel(emitErr)
		}
		if t.ID >= 0 {
			delivered++
		}
		select {
		case e.wake <- struct{}{}:
		default:
		}
	}
	if emitErr != nil {
		// The stats count the tokens the caller was given, not those made
		// ahead of it.
		g.st.GeneratedTokens = min(g.st.GeneratedTokens, delivered)
		return g.st, stopErr(&g.st, emitErr)
	}
	return g.st, r.err
}

// enqueue hands r to the loop.
func (e *engine) enqueue(ctx context.Context, r *request) error {
	e.mu.Lock()
	e.waiting++
	e.mu.Unlock()
	select {
	case e.submit <- r:
		return nil
	case <-e.quit:
		e.mu.Lock()
		e.waiting--
		e.mu.Unlock()
		return errClosed
	case <-ctx.Done():
		e.mu.Lock()
		e.waiting--
		e.mu.Unlock()
		return ctx.Err()
	}
}

// scoring is a PromptLogprobs request: its prompt runs a token a step,
// beside the generations, each step's logits scoring the next token.
type scoring struct {
	tokens []int32
	top    int
	out    []Token
}

// promptLogprobs is Model.PromptLogprobs on the engine.
func (e *engine) promptLogprobs(ctx context.Context, tokens []int32, top int) ([]Token, error) {
	if len(tokens) < 2 {
		return []Token{}, nil
	}
	r := &request{tokens: make(chan Token, tokenBuffer), score: &scoring{tokens: tokens, top: top}}
	r.ctx, r.cancel = context.WithCancelCause(ctx)
	defer r.cancel(nil)
	if err := e.enqueue(ctx, r); err != nil {
		return nil, fmt.Errorf("prompt logprobs: %w", err)
	}
	for range r.tokens { // closed when the scoring ends
	}
	if r.err != nil {
		return nil, fmt.Errorf("prompt logprobs: %w", r.err)
	}
	return r.score.out, nil
}

// Stats reports what the engine is doing.
func (e *engine) Stats() EngineStats {
	e.mu.Lock()
	st := e.stats
	st.Waiting += e.waiting
	e.mu.Unlock()
	u := e.be.KV().Usage()
	st.KVBlocksUsed, st.KVBlocks = u.Held, u.Blocks
	st.PromptTokensReused, st.TokensComputed = u.Reused, u.Computed
	return st
}

func (e *engine) loop() {
	defer close(e.done)
	var queue, running []*request // waiting for room; admitted, oldest first
	finish := func(r *request, err error) {
		if r.finished {
			return
		}
		if r.seq != nil {
			r.seq.Free()
			r.seq = nil
			e.addRunning(-1)
		}
		if r.g != nil {
			if !r.decodeStart.IsZero() {
				r.g.st.DecodeDuration = time.Since(r.decodeStart)
			}
			if err != nil && r.g.st.StopReason == "" {
				stopErr(&r.g.st, err)
			}
		}
		r.err, r.finished = err, true
		close(r.tokens)
	}
	defer func() {
		for _, r := range append(queue, running...) {
			finish(r, errClosed)
		}
	}()
	for {
		// Wait for something to do: a request, a caller taking a token, a
		// step to run.
		var timer <-chan time.Time
		switch {
		case len(queue) == 0 && len(running) == 0:
			timer = nil // idle
		case !e.anyReady(running) && firstReady(queue) < 0:
			// Every caller is behind: a caller taking a token wakes the
			// loop; the timer notices cancellations.
			timer = time.After(2 * time.Millisecond)
		default:
			timer = closedTime
		}
		take := func(r *request) {
			e.mu.Lock()
			e.waiting--
			e.mu.Unlock()
			if r.score != nil {
				r.pending = r.score.tokens[:len(r.score.tokens)-1]
			} else {
				r.pending = r.g.prompt // read only: fed is a copy
			}
			queue = append(queue, r)
		}
		select {
		case r := <-e.submit:
			take(r)
		case <-e.wake:
		case <-timer:
		case <-e.quit:
			return
		}
		// Then every request already being handed over: a select picks
		// among its ready cases at random, so with the timer ready a
		// wait took about one of a burst's requests a loop, and the rest
		// came a step at a time (the last of 32 chat requests sent at
		// once waited many steps for its first token).
		for drained := false; !drained; {
			select {
			case r := <-e.submit:
				take(r)
			default:
				drained = true
			}
		}

		// Drop what was cancelled.
		keep := func(rs []*request) []*request {
			return slices.DeleteFunc(rs, func(r *request) bool {
				if err := context.Cause(r.ctx); err != nil {
					finish(r, err)
					return true
				}
				return false
			})
		}
		queue, running = keep(queue), keep(running)

		// Admit waiting requests, oldest first, while their prompts fit.
		// One whose caller has not taken its tokens (preempted while it
		// was behind) waits until it can step: admitted, it would only
		// push out another.
		for {
			i := firstReady(queue)
			if i < 0 {
				break
			}
			// Every sequence slot is taken: one whose caller is behind
			// gives its slot up below (as it gives room up), so that a
			// caller who stops reading holds back only itself; with none
			// behind, r waits.
			full := len(running) >= e.maxSeqs
			if full && e.allReady(running) {
				break
			}
			r := queue[i]
			prefix := r.pending
			if r.score != nil {
				prefix = nil // every position's logits are wanted
			}
			seq, reused := e.be.KV().NewSeq(prefix)
			if err := seq.Reserve(len(r.pending) - reused); err != nil {
				seq.Free()
				if len(running) == 0 {
					finish(r, fmt.Errorf("generate: %d tokens do not fit the KV cache: %w", len(r.pending), err))
					queue = slices.Delete(queue, i, i+1)
					continue
				}
				// A running request whose reader has not taken its tokens
				// cannot step: it gives its room up and queues behind r
				// (its blocks stay in the prefix cache while nobody needs
				// them, so coming back is mostly a cache hit).
				if !e.yieldStalled(&running, &queue, i) {
					break
				}
				continue
			}
			if full && !e.yieldStalled(&running, &queue, i) {
				seq.Free() // cannot happen: one was behind
				break
			}
			r.seq, r.fed, r.pending = seq, slices.Clone(r.pending[:reused]), r.pending[reused:]
			if r.g != nil && !r.promptDone {
				r.g.st.PromptReused = reused
				r.started = time.Now()
			}
			running = append(running, r)
			e.addRunning(1)
			queue = slices.Delete(queue, i, i+1)
		}

		e.mu.Lock()
		e.stats.Waiting = len(queue)
		e.mu.Unlock()

		// Room for every decoding sequence that can step, preempting
		// (makeRoom) when the pool runs out (prompts reserved theirs when
		// admitted).
		for _, r := range slices.Clone(running) {
			if r.seq != nil && r.promptDone && len(r.pending) == 1 && r.seq.Room() == 0 && r.ready() {
				e.makeRoom(r, &running, &queue)
			}
		}

		// The step: one token of each decoding sequence, then prompt
		// chunks with the tokens left. A sequence whose caller has not
		// taken its last tokens sits out, and so does one without room:
		// its caller was behind when room was made above and has read
		// since (the next iteration reserves it).
		var steps []backend.SeqStep
		var who []*request
		budget := e.stepTokens
		for pass := 0; pass < 2; pass++ {
			for _, r := range running {
				decoding := r.promptDone && len(r.pending) == 1
				if (pass == 0) != decoding || !r.ready() || budget == 0 || decoding && r.seq.Room() == 0 {
					continue
				}
				n := min(len(r.pending), budget)
				if r.score != nil {
					n = min(n, e.scoreRows) // the logits of every position
				}
				st := backend.SeqStep{Seq: r.seq, Tokens: r.pending[:n]}
				if r.score != nil {
					vocab := e.m.tok.VocabSize()
					if len(r.logits) < e.scoreRows*vocab {
						r.logits = make([]float32, e.scoreRows*vocab)
					}
					if e.scoreRows > 1 {
						st.AllLogits = r.logits[:n*vocab]
					} else {
						st.Logits = r.logits[:vocab]
					}
				} else if n == len(r.pending) {
					if r.g.h != nil {
						if r.logits == nil {
							r.logits = make([]float32, e.m.tok.VocabSize())
						}
						st.Logits = r.logits
					} else {
						st.Sample, st.Sampler = true, r.g.s
					}
				}
				steps = append(steps, st)
				who = append(who, r)
				budget -= n
			}
		}
		if len(steps) == 0 {
			continue
		}
		err := e.step(steps)
		e.mu.Lock()
		e.stats.Steps++
		e.mu.Unlock()
		for k := range steps {
			if err != nil {
				finish(who[k], err)
				continue
			}
			e.took(who[k], &steps[k], finish)
		}
		running = slices.DeleteFunc(running, func(r *request) bool { return r.finished })
	}
}

// took handles what a step gave request r (entry st): the sampled token
// through the generation (or the next token's score), finishing r when it
// is done. A panic there fails r alone.
func (e *engine) took(r *request, st *backend.SeqStep, finish func(*request, error)) {
	defer func() {
		if p := recover(); p != nil {
			finish(r, fmt.Errorf("generate: internal error: %v", p))
		}
	}()
	r.fed = append(r.fed, st.Tokens...)
	r.pending = r.pending[len(st.Tokens):]
	if sc := r.score; sc != nil {
		// The logits after position i score token i+1; after a preemption
		// the positions already scored run again without a second score.
		vocab := e.m.tok.VocabSize()
		fed0 := len(r.fed) - len(st.Tokens)
		for k := range st.Tokens {
			i := fed0 + k + 1
			if i <= len(sc.out) {
				continue
			}
			logits := st.Logits
			if st.AllLogits != nil {
				logits = st.AllLogits[k*vocab : (k+1)*vocab]
			}
			next := sc.tokens[i]
			lp, list := logprobs(e.m, logits, next, sc.top)
			sc.out = append(sc.out, Token{ID: next, Text: e.m.tok.Piece(next), Logprob: lp, Top: list})
		}
		if len(r.pending) == 0 {
			finish(r, nil)
		}
		return
	}
	if !st.Sample && st.Logits == nil {
		return // more of the prompt to read
	}
	tok := st.Next
	if r.g.h != nil {
		r.g.h.logits = st.Logits
		var err error
		if tok, err = r.g.h.pick(); err != nil {
			finish(r, err)
			return
		}
	}
	if !r.promptDone {
		r.promptDone = true
		r.g.st.PromptDuration = time.Since(r.started)
		r.decodeStart = time.Now()
	} else {
		r.g.st.decodes++
	}
	if done, err := r.g.accept(tok, len(r.fed)); done {
		finish(r, err)
		return
	}
	r.pending = []int32{tok}
}

// step runs the backend's step. A panic there (a bug) fails the step's
// generations instead of the process: the loop is not a request handler,
// whose panics the server recovers.
func (e *engine) step(steps []backend.SeqStep) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("generate: internal error in the batched step: %v", p)
		}
	}()
	return e.be.Step(context.Background(), steps)
}

// addRunning counts generations in and out of the running set (those with a
// sequence), before their callers can see them end.
func (e *engine) addRunning(n int) {
	e.mu.Lock()
	e.stats.Running += n
	e.mu.Unlock()
}

// yieldStalled preempts the most recently admitted running request that
// cannot step (its token buffer is full), putting it in the queue right
// behind queue[at], the request that needs its room. It reports whether it
// found one.
func (e *engine) yieldStalled(running, queue *[]*request, at int) bool {
	rs := *running
	for i := len(rs) - 1; i >= 0; i-- {
		v := rs[i]
		if v.ready() {
			continue // it can step: no reason to stop it
		}
		v.seq.Free()
		v.seq = nil
		e.addRunning(-1)
		v.pending = append(v.fed, v.pending...)
		v.fed = nil
		*running = slices.Delete(rs, i, i+1)
		*queue = slices.Insert(*queue, at+1, v)
		e.mu.Lock()
		e.stats.Preemptions++
		e.mu.Unlock()
		return true
	}
	return false
}

// firstReady is the index of the first queued request to admit, or -1:
// one whose caller has taken at least half its buffer. A request
// preempted while its caller was behind comes back only then, or it would
// be behind again a token later and give its room up once more, its whole
// context recomputed each time.
func firstReady(queue []*request) int {
	return slices.IndexFunc(queue, func(r *request) bool { return len(r.tokens) <= cap(r.tokens)/2 })
}

// allReady reports whether every running generation can step: none
// would give its slot up.
func (e *engine) allReady(running []*request) bool {
	for _, r := range running {
		if !r.ready() {
			return false
		}
	}
	return true
}

// closedTime is a channel that is always ready.
var closedTime = func() <-chan time.Time {
	c := make(chan time.Time)
	close(c)
	return c
}()

// anyReady reports whether some running generation can take a step: its
// caller has room for more tokens.
func (e *engine) anyReady(running []*request) bool {
	for _, r := range running {
		if r.ready() {
			return true
		}
	}
	return false
}

// makeRoom reserves a block for r's next token, preempting sequences
// (their keys and values are dropped and recomputed when they are admitted
// again) until one is free: first the most recently admitted of those
// whose caller is behind (they could not step anyway, and come back only
// once their caller has read), then the most recently admitted; when that
// is r, r is the one preempted.
func (e *engine) makeRoom(r *request, running, queue *[]*request) {
	for r.seq.Reserve(len(r.pending)) != nil {
		rs := *running
		i := len(rs) - 1 // admitted last
		for j := len(rs) - 1; j >= 0; j-- {
			if rs[j] != r && !rs[j].ready() {
				i = j
				break
			}
		}
		victim := rs[i]
		victim.seq.Free()
		victim.seq = nil
		e.addRunning(-1)
		victim.pending = append(victim.fed, victim.pending...) // fed is the engine's own
		victim.fed = nil
		*running = slices.Delete(rs, i, i+1)
		*queue = append([]*request{victim}, *queue...)
		e.mu.Lock()
		e.stats.Preemptions++
		e.mu.Unlock()
		if victim == r {
			return
		}
	}
}
