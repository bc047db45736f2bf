package quant

import "math"

// The K-quant encoders' search for each sub-block's scale (and min): the
// one whose codes reproduce the sub-block with the least weighted squared
// error, among scales near the one that maps the sub-block's range (or
// its largest magnitude) onto the codes, each candidate's scale and min
// refit by least squares to the codes it gives. llama-quantize searches
// the same way (ggml's make_qkx2_quants and make_qx_quants); the plain
// range mapping left a few percent more error.

// fitMinScale finds s ≥ 0 and m ≥ 0 with x ≈ s·q − m for codes q in
// 0…nmax, weighted by w, trying nstep+1 scales (nmax + rmin + rdelta·i) /
// (max − min) besides the range's own, min being the best fit's offset so
// far. It returns s and m. One pass over x a candidate: the error comes
// from the weighted sums of the codes (see sumErr).
func fitMinScale(x, w []float32, nmax int32, rmin, rdelta float32, nstep int) (s, m float32) {
	lo, hi := x[0], x[0]
	var sw, sx, sx2 float64
	for i, v := range x {
		lo, hi = min(lo, v), max(hi, v)
		wi, vi := float64(w[i]), float64(v)
		sw += wi
		sx += wi * vi
		sx2 += wi * vi * vi
	}
	lo = min(lo, 0)
	if !(hi > lo) || math.IsInf(float64(hi-lo), 0) {
		return 0, -lo
	}
	// sums are the weighted sums of the codes of iscale (from lo).
	sums := func(iscale float32) (sl, sl2, sxl float64) {
		var a, b, c float32 // 32 terms: float32 holds them (and is twice as fast)
		for i, v := range x {
			q := float32(posCode(iscale*(v-lo), nmax))
			wq := w[i] * q
			a += wq
			b += wq * q
			c += wq * v
		}
		return float64(a), float64(b), float64(c)
	}
	// sumErr is Σ w·(s·q + mn − x)² expanded over the sums.
	sumErr := func(s, mn, sl, sl2, sxl float64) float64 {
		return s*s*sl2 + 2*s*mn*sl - 2*s*sxl + mn*mn*sw - 2*mn*sx + sx2
	}
	iscale := float32(nmax) / (hi - lo)
	bestS, bestMn := float64(1/iscale), float64(lo)
	sl, sl2, sxl := sums(iscale)
	best := sumErr(bestS, bestMn, sl, sl2, sxl)
	for i := 0; i <= nstep; i++ {
		sl, sl2, sxl := sums((rmin + rdelta*float32(i) + float32(nmax)) / (hi - lo))
		d := sw*sl2 - sl*sl
		if !(d > 0) {
			continue
		}
		s, mn := (sw*sxl-sx*sl)/d, (sl2*sx-sl*sxl)/d
		if mn > 0 { // the model has no positive offset: refit the scale alone
			mn, s = 0, sxl/sl2
		}
		if e := sumErr(s, mn, sl, sl2, sxl); e < best {
			// The next candidates take their codes from the better fit's
			// offset (the search walks from each improvement on).
			best, bestS, bestMn, lo = e, s, mn, float32(mn)
		}
	}
	return float32(bestS), float32(-bestMn)
}

// symCode rounds t to the nearest code in −nmax…nmax−1 (half away from
// zero); NaN gives −nmax.
func symCode(t float32, nmax int32) int32 {
	if !(t > float32(-nmax)) {
		return -nmax
	}
	if t >= float32(nmax-1) {
		return nmax - 1
	}
	if t >= 0 {
		return int32(t + 0.5)
	}
	return -int32(0.5 - t)
}

// largest is the value of x of largest magnitude (the first of equals; 0
// when x is all zero or NaN).
func largest(x []float32) float32 {
	var big float32
	for _, v := range x {
		if abs32(v) > abs32(big) {
			big = v
		}
	}
	return big
}

// scalable reports whether a largest value can set a scale: finite and
// nonzero.
func scalable(big float32) bool { return big != 0 && !math.IsInf(float64(big), 0) && big == big }

// posCode rounds t ≥ 0 to the nearest code in 0…nmax (half up); NaN and
// negative t give 0.
func posCode(t float32, nmax int32) int32 {
	if !(t > 0) {
		return 0
	}
	if t >= float32(nmax) {
		return nmax
	}
	return int32(t + 0.5)
}

// fitScale finds s with x ≈ s·q for codes q in −nmax…nmax−1, weighted by
// x² (large values count most), trying scales that map the value of
// largest magnitude to −(nmax + i/10), i in −9…9. s takes that value's
// sign's opposite, as llama.cpp's encoders do, so −nmax is used.
func fitScale(x []float32, nmax int32) float32 {
	big := largest(x)
	if !scalable(big) {
		return -big / float32(nmax)
	}
	var bestS float32
	bestObj := -1.0
	for i := -9; i <= 9; i++ {
		iscale := -(float32(nmax) + 0.1*float32(i)) / big
		var a, b float32 // at most 32 terms
		for _, v := range x {
			q := float32(symCode(iscale*v, nmax))
			wq := v * v * q
			a += wq * v
			b += wq * q
		}
		sxl, sl2 := float64(a), float64(b)
		// With the least-squares scale sxl/sl2 the error is Σwx² −
		// sxl²/sl2: the largest sxl²/sl2 wins.
		if sl2 > 0 && sxl*sxl/sl2 > bestObj {
			bestObj, bestS = sxl*sxl/sl2, float32(sxl/sl2)
		}
	}
	if bestObj < 0 {
		return -big / float32(nmax)
	}
	return bestS
}

// refineScale fits x ≈ s·q as fitScale does, from the scale that maps the
// value of largest magnitude to −nmax, one code at a time: each value's
// code moves to its nearest under the scale that the other values' codes
// fit, when that lowers the error; a few passes. x has at most 32 values.
// On Q3_K's 3-bit codes this beats fitScale's search (relative RMS error
// 0.1509 against 0.1529 on test-256); on Q6_K's 6-bit ones it loses
// (0.0184 against 0.0177).
func refineScale(x []float32, nmax int32) float32 {
	big := largest(x)
	s := -big / float32(nmax)
	if !scalable(big) {
		return s
	}
	var q [32]float64
	var sxl, sl2 float64
	for i, v := range x {
		q[i] = float64(roundClamp(v/s, -nmax, nmax-1))
		w := float64(v) * float64(v)
		sxl += w * q[i] * float64(v)
		sl2 += w * q[i] * q[i]
	}
	for pass := 0; pass < 5; pass++ {
		changed := false
		for i, v := range x {
			w := float64(v) * float64(v)
			oxl, ol2 := sxl-w*float64(v)*q[i], sl2-w*q[i]*q[i] // without value i
			if !(oxl > 0) {
				continue
			}
			nq := float64(roundClamp(float32(float64(v)*ol2/oxl), -nmax, nmax-1))
			if nq == q[i] {
				continue
			}
			nxl, nl2 := oxl+w*float64(v)*nq, ol2+w*nq*nq
			if nl2 > 0 && nxl*nxl*sl2 > sxl*sxl*nl2 {
				sxl, sl2, q[i] = nxl, nl2, nq
				changed = true
			}
		}
		if !changed {
			break
		}
	}
	if !(sl2 > 0) {
		return s
	}
	return float32(sxl / sl2)
}
