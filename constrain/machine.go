package constrain

import "slices"

// The machine reads a JSON text byte by byte against a grammar. Its state is
// a set of threads, one per way the bytes so far can be read (a union opens
// one per alternative that accepts the value's first byte); each thread is a
// stack of frames, one per value being read, with the root frame at the
// bottom. A thread is only ever in a state from which some continuation
// completes the value: a byte that would lead to a dead end is refused. That
// is what lets the token mask never paint generation into a corner.
//
// Whitespace: a gap between two tokens of JSON (after '{', '[', ':', ',',
// before ':', ',', '}', ']', and before the root value) may hold one space,
// or one newline followed by at most 20 spaces or tabs (llama.cpp's grammar
// rule), so pretty-printed JSON is possible but a model cannot loop on
// whitespace. Nothing may follow the root value.

type phase uint8

const (
	rootValue phase = iota // before the root value
	rootDone               // after it: the end

	objOpen  // after '{': a key or '}'
	objKey   // inside a key
	objColon // after a key: ':'
	objValue // after ':': the value
	objNext  // after a value: ',' or '}'
	objComma // after ',': a key

	arrOpen  // after '[': a value or ']'
	arrNext  // after a value: ',' or ']'
	arrComma // after ',': a value

	strBody // inside a string value

	numMinus     // after '-'
	numZero      // after a leading 0
	numInt       // in the integer digits
	numDot       // after '.'
	numFrac      // in the fraction digits
	numExp       // after 'e'
	numExpSign   // after the exponent's sign
	numExpDigits // in the exponent digits

	litBody // inside a literal
)

// maxIndent is how many spaces or tabs may follow a newline in a gap.
const maxIndent = 20

// frame is one value being read. It is a comparable value, so that two
// threads that reach the same state can be merged.
type frame struct {
	n     *node
	phase phase
	gap   int8 // whitespace of the current gap: 0 none, -1 a space (closed), k>0 a newline and k-1 indent characters
	str   strState
	count int32  // string: code points so far; array: items so far; number: digits of the current part
	key   int32  // object: key trie node while reading a key, -1 off the trie; literal: trie node
	prop  int32  // object: the property whose value comes next, -1 for an additional property
	seen  uint64 // object: properties written
	fit   uint64 // object: properties whose values fit under maxDepth
}

// link is a frame below the top of a stack. Links are shared between the
// threads of a union and between successive states, and never modified.
type link struct {
	f      frame
	parent *link
}

// thread is one reading of the bytes so far: the top frame, held by value
// so that most bytes change no memory but the thread itself, and the rest
// of the stack. depth is the level of the top frame (the root is 0).
type thread struct {
	top    frame
	parent *link
	depth  int32
}

// arena hands out links for speculative steps (the vocabulary walk), whose
// states are all dropped after the walk, in slabs rather than one by one.
// A nil arena allocates each link on the heap.
type arena struct {
	slab []link
}

func (a *arena) newLink(l link) *link {
	if a == nil {
		p := new(link)
		*p = l
		return p
	}
	if len(a.slab) == cap(a.slab) {
		// A new slab: the links handed out from the old one stay valid.
		a.slab = make([]link, 0, max(256, 2*cap(a.slab)))
	}
	a.slab = append(a.slab, l)
	return &a.slab[len(a.slab)-1]
}

func (a *arena) reset() { a.slab = a.slab[:0] }

// start returns the state before any byte of a text of g.
func start(g *Grammar) []thread {
	return []thread{{top: frame{n: g.root, phase: rootValue}}}
}

// maxThreads bounds the readings kept at once (a union of many
// alternatives that begin alike, nested unions). Every thread can complete
// its value, so dropping the later ones only narrows what may be written;
// the order is deterministic, so masks and Accept agree.
const maxThreads = 64

// stepAll appends to dst the threads that follow the threads of src on b,
// with duplicates merged. Once twice maxThreads are found, it looks no
// further (a union of many alternatives that begin alike, under many
// threads), so a byte costs at most maxThreads*maxChoices tries.
func stepAll(dst, src []thread, b byte, a *arena) []thread {
	base := len(dst)
	limit := base + 2*maxThreads
	merge := false // whether two threads may have met
	for i := range src {
		if len(dst) >= limit {
			break
		}
		// A plain character of a string only adds to the thread's count:
		// distinct threads stay distinct, and src is already merged.
		merge = merge || !plainChar(&src[i].top, b)
		dst = step(dst, &src[i], b, a, limit)
	}
	if merge && len(dst)-base > 1 {
		dst = dst[:base+len(dedupe(dst[base:]))]
	}
	return dst[:min(len(dst), base+maxThreads)]
}

// dedupe drops the threads equal to an earlier one, in place. Merging is
// only an economy (every thread is valid), but readings that part and meet
// again (the alternatives of a union, once their value ends) would
// otherwise multiply.
func dedupe(ts []thread) []thread {
	if len(ts) <= 8 {
		out := ts[:1]
		for _, t := range ts[1:] {
			if !slices.ContainsFunc(out, func(u thread) bool { return same(&t, &u) }) {
				out = append(out, t)
			}
		}
		return out
	}
	// Many threads: a hash table on the stack, so that a union of many
	// alternatives costs linear, not quadratic, time per byte. Past twice
	// the threads kept, the rest are dropped first.
	ts = ts[:min(len(ts), 2*maxThreads)]
	var slots [4 * maxThreads]int16 // 1 + index into out; 0: empty
	const mask = uint32(len(slots) - 1)
	out := ts[:0]
	for i := range ts {
		t := ts[i]
		f := &t.top
		h := (uint32(f.n.id)*2654435761 ^ uint32(t.depth)*40503 ^ uint32(f.phase)<<20 ^ uint32(f.count)*31 ^ uint32(f.key)*97) & mask
		for {
			s := slots[h]
			if s == 0 {
				out = append(out, t) // never past ts[i]: out is a prefix of ts
				slots[h] = int16(len(out))
				break
			}
			if same(&out[s-1], &t) {
				break
			}
			h = (h + 1) & mask
		}
	}
	return out
}

func same(a, b *thread) bool {
	return a.depth == b.depth && a.parent == b.parent && a.top == b.top
}

// complete reports whether the text read so far is a whole value of the
// grammar: end of text may come now.
func complete(ts []thread) bool {
	for i := range ts {
		t := &ts[i]
		if t.top.phase == rootDone || t.depth == 1 && lazyComplete(&t.top) {
			return true
		}
	}
	return false
}

// finished reports whether the text is a whole value and nothing can follow.
func finished(ts []thread) bool {
	for i := range ts {
		t := &ts[i]
		if t.top.phase != rootDone && !(t.depth == 1 && numberFull(&t.top)) {
			return false
		}
	}
	return len(ts) > 0
}

// numberFull reports whether f is a whole number that can take no more
// bytes: an integer's leading 0, or its last allowed digit.
func numberFull(f *frame) bool {
	switch f.phase {
	case numZero:
		return f.n.integer
	case numInt:
		return f.n.integer && f.count >= maxIntDigits
	case numExpDigits:
		return f.count >= maxExpDigits
	}
	return false
}

// lazyComplete reports whether f, a number or literal, is a whole value
// that more bytes could still extend: it ends when a byte it cannot take
// comes, which goes on to the frame below.
func lazyComplete(f *frame) bool {
	switch f.phase {
	case numZero, numInt, numFrac, numExpDigits:
		return true
	case litBody:
		return f.n.lits.nodes[f.key].end >= 0
	}
	return false
}

func pop(t *thread) thread {
	return thread{top: t.parent.f, parent: t.parent.parent, depth: t.depth - 1}
}

func push(t *thread, f frame, a *arena) thread {
	return thread{top: f, parent: a.newLink(link{f: t.top, parent: t.parent}), depth: t.depth + 1}
}

// space takes b into the gap of f if it is whitespace the gap can hold. It
// reports whether b is whitespace at all and whether it was taken.
func space(f *frame, b byte) (isSpace, taken bool) {
	switch b {
	case ' ', '\t':
		switch {
		case f.gap == 0 && b == ' ':
			f.gap = -1
			return true, true
		case f.gap > 0 && f.gap <= maxIndent:
			f.gap++
			return true, true
		}
		return true, false
	case '\n':
		if f.gap == 0 {
			f.gap = 1
			return true, true
		}
		return true, false
	case '\r':
		return true, false
	}
	return false, false
}

// plainChar reports whether b is a plain ASCII character of the string
// that f reads.
func plainChar(f *frame, b byte) bool {
	return f.phase == strBody && f.str == (strState{}) && b >= 0x20 && b < 0x80 && b != '"' && b != '\\'
}

// step appends the threads that follow t on b to dst.
func step(dst []thread, t *thread, b byte, a *arena, limit int) []thread {
	if tf := &t.top; plainChar(tf, b) {
		// The common case of a mask inside a string.
		if tf.n.maxLen >= 0 && int(tf.count) >= tf.n.maxLen {
			return dst
		}
		dst = append(dst, *t)
		dst[len(dst)-1].top.count++
		return dst
	}
	f := t.top // a copy, changed and appended when b is taken
	switch f.phase {
	case rootValue, objColon, objValue, objNext, objOpen, objComma, arrOpen, arrNext, arrComma:
		if isSpace, taken := space(&f, b); isSpace {
			if taken {
				dst = append(dst, thread{top: f, parent: t.parent, depth: t.depth})
			}
			return dst
		}
		f.gap = 0
	}
	n := f.n
	switch f.phase {
	case rootValue:
		f.phase = rootDone
		return startValue(dst, thread{top: f, parent: t.parent, depth: t.depth}, n, b, a, limit)
	case rootDone:
		return dst

	case objOpen, objComma:
		switch {
		case b == '"' && canKey(&f, t.depth):
			f.phase, f.key, f.str = objKey, -1, strState{}
			if !n.keys.empty() {
				f.key = 0
			}
			return append(dst, thread{top: f, parent: t.parent, depth: t.depth})
		case b == '}' && f.phase == objOpen && n.required&^f.seen == 0:
			return append(dst, pop(t))
		}
		return dst
	case objKey:
		return objectKey(dst, t, f, b)
	case objColon:
		if b == ':' {
			f.phase = objValue
			return append(dst, thread{top: f, parent: t.parent, depth: t.depth})
		}
		return dst
	case objValue:
		v := n.additional
		if f.prop >= 0 {
			v = n.props[f.prop].value
		}
		f.phase = objNext
		return startValue(dst, thread{top: f, parent: t.parent, depth: t.depth}, v, b, a, limit)
	case objNext:
		switch {
		case b == ',' && canKey(&f, t.depth):
			f.phase = objComma
			return append(dst, thread{top: f, parent: t.parent, depth: t.depth})
		case b == '}' && n.required&^f.seen == 0:
			return append(dst, pop(t))
		}
		return dst

	case arrOpen, arrComma:
		if b == ']' && f.phase == arrOpen && n.minItems == 0 {
			return append(dst, pop(t))
		}
		if n.maxItems >= 0 && int(f.count) >= n.maxItems {
			return dst
		}
		f.phase = arrNext
		f.count++
		return startValue(dst, thread{top: f, parent: t.parent, depth: t.depth}, n.items, b, a, limit)
	case arrNext:
		switch {
		case b == ',' && (n.maxItems < 0 || int(f.count) < n.maxItems) && int(t.depth)+n.items.nest <= maxDepth:
			f.phase = arrComma
			return append(dst, thread{top: f, parent: t.parent, depth: t.depth})
		case b == ']' && int(f.count) >= n.minItems:
			return append(dst, pop(t))
		}
		return dst

	case strBody:
		r := f.str.step(b, true)
		switch {
		case r == strReject:
			return dst
		case r == strClose:
			if int(f.count) < n.minLen {
				return dst
			}
			return append(dst, pop(t))
		case r == strChar:
			if n.maxLen >= 0 && int(f.count) >= n.maxLen {
				return dst
			}
			f.count++
		}
		return append(dst, thread{top: f, parent: t.parent, depth: t.depth})

	case numMinus:
		switch {
		case b == '0':
			f.phase = numZero
		case b >= '1' && b <= '9':
			f.phase, f.count = numInt, 1
		default:
			return dst
		}
		return append(dst, thread{top: f, parent: t.parent, depth: t.depth})
	case numZero, numInt, numFrac, numExpDigits:
		switch {
		case b >= '0' && b <= '9' && f.phase == numInt && f.count < maxIntDigits,
			b >= '0' && b <= '9' && f.phase == numFrac && f.count < maxFracDigits,
			b >= '0' && b <= '9' && f.phase == numExpDigits && f.count < maxExpDigits:
			f.count++
		case b == '.' && !n.integer && (f.phase == numZero || f.phase == numInt):
			f.phase, f.count = numDot, 0
		case (b == 'e' || b == 'E') && !n.integer && f.phase != numExpDigits:
			f.phase, f.count = numExp, 0
		default:
			// The number has ended: b belongs to the frame below.
			p := pop(t)
			return step(dst, &p, b, a, limit)
		}
		return append(dst, thread{top: f, parent: t.parent, depth: t.depth})
	case numDot, numExp, numExpSign:
		switch {
		case b >= '0' && b <= '9':
			f.phase, f.count = numExpDigits, 1
			if t.top.phase == numDot {
				f.phase = numFrac
			}
		case (b == '+' || b == '-') && f.phase == numExp:
			f.phase = numExpSign
		default:
			return dst
		}
		return append(dst, thread{top: f, parent: t.parent, depth: t.depth})

	case litBody:
		next := n.lits.child(f.key, b)
		if next < 0 {
			if n.lits.nodes[f.key].end >= 0 {
				p := pop(t)
				return step(dst, &p, b, a, limit)
			}
			return dst
		}
		if nd := &n.lits.nodes[next]; nd.end >= 0 && len(nd.edges) == 0 {
			return append(dst, pop(t))
		}
		f.key = next
		return append(dst, thread{top: f, parent: t.parent, depth: t.depth})
	}
	return dst
}

// startValue appends the threads that begin a value of n with b on top of
// t, whose top frame is already in the state that follows the value.
func startValue(dst []thread, t thread, n *node, b byte, a *arena, limit int) []thread {
	if n == nil || int(t.depth)+n.nest > maxDepth {
		return dst
	}
	switch n.kind {
	case kindUnion:
		choices := n.choices
		if n.first != nil {
			choices = n.byFirst[n.first[b]:n.first[int(b)+1]]
		}
		for _, c := range choices {
			if len(dst) >= limit {
				break
			}
			dst = startValue(dst, t, c, b, a, limit)
		}
		return dst
	case kindObject:
		if b != '{' {
			return dst
		}
		f := frame{n: n, phase: objOpen}
		for i, p := range n.props {
			if int(t.depth)+1+p.value.nest <= maxDepth {
				f.fit |= 1 << i
			}
		}
		return append(dst, push(&t, f, a))
	case kindArray:
		if b != '[' {
			return dst
		}
		return append(dst, push(&t, frame{n: n, phase: arrOpen}, a))
	case kindString:
		if b != '"' {
			return dst
		}
		return append(dst, push(&t, frame{n: n, phase: strBody}, a))
	case kindNumber:
		f := frame{n: n}
		switch {
		case b == '-':
			f.phase = numMinus
		case b == '0':
			f.phase = numZero
		case b >= '1' && b <= '9':
			f.phase, f.count = numInt, 1
		default:
			return dst
		}
		return append(dst, push(&t, f, a))
	case kindLiteral:
		next := n.lits.child(0, b)
		if next < 0 {
			return dst
		}
		if nd := &n.lits.nodes[next]; nd.end >= 0 && len(nd.edges) == 0 {
			return append(dst, t) // a one-byte literal: already whole
		}
		return append(dst, push(&t, frame{n: n, phase: litBody, key: next}, a))
	}
	return dst
}

// canKey reports whether a key can start in object frame f at depth: a
// property not yet written whose value fits, or any other name.
func canKey(f *frame, depth int32) bool {
	n := f.n
	if freeKeys(n, depth) {
		return true
	}
	return !n.keys.empty() && n.keys.nodes[0].below&f.fit&^f.seen != 0
}

// freeKeys reports whether an object of n at depth may have properties
// other than its named ones.
func freeKeys(n *node, depth int32) bool {
	return n.additional != nil && int(depth)+n.additional.nest <= maxDepth
}

// objectKey reads byte b of a key. Names of the schema's properties are
// followed on the key trie; with additional properties, any other name is
// read as a string, without escapes when the schema names properties (so
// that no name can spell a property's name another way and escape its
// schema).
func objectKey(dst []thread, t *thread, f frame, b byte) []thread {
	n := f.n
	next := int32(-1)
	if f.key >= 0 {
		next = n.keys.child(f.key, b)
	}
	if !freeKeys(n, t.depth) {
		if next < 0 || n.keys.nodes[next].below&f.fit&^f.seen == 0 {
			return dst
		}
		if p := n.keys.nodes[next].end; p >= 0 && b == '"' {
			f.phase, f.prop, f.gap = objColon, int32(p), 0
			f.seen |= 1 << p
		} else {
			f.key = next
		}
		return append(dst, thread{top: f, parent: t.parent, depth: t.depth})
	}
	switch f.str.step(b, len(n.props) == 0) {
	case strReject:
		return dst
	case strClose:
		f.prop = -1
		if next >= 0 {
			if p := n.keys.nodes[next].end; p >= 0 {
				if f.seen&(1<<p) != 0 || f.fit&(1<<p) == 0 {
					return dst // a property's name that cannot be used again or here
				}
				f.prop = int32(p)
				f.seen |= 1 << p
			}
		}
		f.phase, f.gap = objColon, 0
		return append(dst, thread{top: f, parent: t.parent, depth: t.depth})
	}
	f.key = next
	return append(dst, thread{top: f, parent: t.parent, depth: t.depth})
}

// strState follows the escapes and UTF-8 sequences of a JSON string.
type strState struct {
	esc    uint8 // escNone, escStart or the \u digits still due
	need   uint8 // UTF-8 continuation bytes still due
	lo, hi byte  // the range of the next continuation byte
}

const (
	escNone  = 0
	escStart = 1 // after '\'
	escU1    = 2 // expecting the 1st hex digit of \uXXXX
	escU2    = 3 // the 2nd
	escU3    = 4
	escU4    = 5
	escU2D   = 6 // the 2nd after a 'd' (no surrogates: 0-7 only)
)

type strResult uint8

const (
	strReject strResult = iota
	strMore             // a byte inside a character
	strChar             // the first byte of a character
	strClose            // the closing quote
)

func isHex(b byte) bool {
	return b >= '0' && b <= '9' || b >= 'a' && b <= 'f' || b >= 'A' && b <= 'F'
}

// step reads one byte of a string's content. Escapes are refused unless
// escapes is set; \u escapes of surrogates are always refused (a lone one
// is not a character, and a pair would count as one).
func (s *strState) step(b byte, escapes bool) strResult {
	if s.need > 0 {
		if b < s.lo || b > s.hi {
			return strReject
		}
		s.need--
		s.lo, s.hi = 0x80, 0xBF
		return strMore
	}
	switch s.esc {
	case escNone:
	case escStart:
		switch b {
		case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
			s.esc = escNone
		case 'u':
			s.esc = escU1
		default:
			return strReject
		}
		return strMore
	case escU1:
		switch {
		case b == 'd' || b == 'D':
			s.esc = escU2D
		case isHex(b):
			s.esc = escU2
		default:
			return strReject
		}
		return strMore
	case escU2D:
		if b < '0' || b > '7' {
			return strReject
		}
		s.esc = escU3
		return strMore
	default: // escU2, escU3, escU4
		if !isHex(b) {
			return strReject
		}
		s.esc++
		if s.esc > escU4 {
			s.esc = escNone
		}
		return strMore
	}
	switch {
	case b == '"':
		return strClose
	case b == '\\':
		if !escapes {
			return strReject
		}
		s.esc = escStart
		return strChar
	case b < 0x20:
		return strReject
	case b < 0x80:
		return strChar
	case b >= 0xC2 && b <= 0xDF:
		s.need, s.lo, s.hi = 1, 0x80, 0xBF
	case b == 0xE0:
		s.need, s.lo, s.hi = 2, 0xA0, 0xBF
	case b >= 0xE1 && b <= 0xEC, b == 0xEE, b == 0xEF:
		s.need, s.lo, s.hi = 2, 0x80, 0xBF
	case b == 0xED:
		s.need, s.lo, s.hi = 2, 0x80, 0x9F
	case b == 0xF0:
		s.need, s.lo, s.hi = 3, 0x90, 0xBF
	case b >= 0xF1 && b <= 0xF3:
		s.need, s.lo, s.hi = 3, 0x80, 0xBF
	case b == 0xF4:
		s.need, s.lo, s.hi = 3, 0x80, 0x8F
	default:
		return strReject
	}
	return strChar
}
