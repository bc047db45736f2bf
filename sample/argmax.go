package sample

// Argmax returns the index of the largest logit. Ties go to the lowest index
// and NaN never wins; it returns -1 if logits is empty or all NaN.
func Argmax(logits []float32) int32 {
	first := -1
	for i, l := range logits {
		if l == l { // not NaN
			first = i
			break
		}
	}
	if first < 0 {
		return -1
	}
	// A strict comparison: NaN fails it, and so does a tie with an earlier,
	// lower index. Four logits per branch, as in appendTopK.
	best, bestLogit := first, logits[first]
	i := first + 1
	for ; i+4 <= len(logits); i += 4 {
		q := logits[i : i+4 : i+4]
		if q[0] > bestLogit || q[1] > bestLogit || q[2] > bestLogit || q[3] > bestLogit {
			for j, l := range q {
				if l > bestLogit {
					best, bestLogit = i+j, l
				}
			}
		}
	}
	for ; i < len(logits); i++ {
		if l := logits[i]; l > bestLogit {
			best, bestLogit = i, l
		}
	}
	return int32(best)
}
