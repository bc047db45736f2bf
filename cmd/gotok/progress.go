package main

import (
	"fmt"
	"io"
	"os"
	"path"
	"time"

	"github.com/schollz/progressbar/v3"
	"golang.org/x/term"

	"gotok/hub"
)

// newProgress returns the display of a pull on w: a progress bar (bytes,
// rate, time left) on a terminal, and plain lines every few seconds
// elsewhere (a log file, a CI job), where a bar would be noise.
func newProgress(w io.Writer) func(hub.Progress) {
	if f, ok := w.(*os.File); ok && term.IsTerminal(int(f.Fd())) {
		return barProgress(w)
	}
	return lineProgress(w, 5*time.Second, time.Now)
}

// barProgress draws a bar per file. A resumed download's bar counts the
// bytes still to come, so that its rate and time left are this run's; one
// that starts over (the server ignored the Range) gets a new bar.
func barProgress(w io.Writer) func(hub.Progress) {
	var bar *progressbar.ProgressBar
	var file string
	var from int64
	return func(p hub.Progress) {
		if notice(w, p) {
			return
		}
		if bar == nil || p.File != file || p.Done < from {
			file, from = p.File, p.Done
			desc := path.Base(p.File)
			if from > 0 {
				desc += fmt.Sprintf(" (resumed at %s of %s)", humanBytes(from), humanBytes(p.Total))
			}
			bar = progressbar.NewOptions64(p.Total-from,
				progressbar.OptionSetWriter(w),
				progressbar.OptionSetDescription(desc),
				progressbar.OptionShowBytes(true),
				progressbar.OptionShowCount(),
				progressbar.OptionSetPredictTime(true),
				progressbar.OptionThrottle(100*time.Millisecond),
				progressbar.OptionSetRenderBlankState(true),
				progressbar.OptionOnCompletion(func() { fmt.Fprintln(w) }),
			)
		}
		bar.Set64(p.Done - from)
	}
}

// lineProgress prints a line when a file starts, every interval while it
// downloads, and when it is done. now is the clock (tests pass their own).
func lineProgress(w io.Writer, interval time.Duration, now func() time.Time) func(hub.Progress) {
	var file string
	var start, last time.Time
	var from int64
	return func(p hub.Progress) {
		if notice(w, p) {
			return
		}
		t := now()
		if p.File != file {
			file, start, last, from = p.File, t, t, p.Done
			resumed := ""
			if p.Done > 0 {
				resumed = fmt.Sprintf(", resuming at %s", humanBytes(p.Done))
			}
			fmt.Fprintf(w, "gotok: pulling %s (%s%s)\n", p.File, humanBytes(p.Total), resumed)
		}
		if p.Done < from { // started over: the rate counts from here
			start, from = t, p.Done
		}
		done := p.Done == p.Total
		if !done && t.Sub(last) < interval {
			return
		}
		last = t
		secs := t.Sub(start).Seconds()
		rate := 0.0
		if secs > 0 {
			rate = float64(p.Done-from) / secs
		}
		if done {
			took := t.Sub(start).Round(time.Second)
			if took < 10*time.Second {
				took = t.Sub(start).Round(100 * time.Millisecond)
			}
			fmt.Fprintf(w, "gotok: %s: %s in %s (%s/s)\n", path.Base(p.File), humanBytes(p.Total), took, humanBytes(int64(rate)))
			file = "" // a file pulled again starts afresh
			return
		}
		eta := "?"
		if rate > 0 {
			eta = time.Duration(float64(p.Total-p.Done) / rate * float64(time.Second)).Round(time.Second).String()
		}
		fmt.Fprintf(w, "gotok: %s: %s of %s (%.0f%%), %s/s, %s left\n", path.Base(p.File), humanBytes(p.Done), humanBytes(p.Total),
			100*float64(p.Done)/float64(max(p.Total, 1)), humanBytes(int64(rate)), eta)
	}
}

// notice writes a line for a report that is not of bytes downloaded, and
// says whether p was one: a wait for another process's download of the
// file, or the start of reading back a partial download to resume it.
func notice(w io.Writer, p hub.Progress) bool {
	switch {
	case p.Waiting:
		fmt.Fprintf(w, "gotok: waiting for another download of %s\n", p.File)
	case p.Checking:
		if p.Done == 0 {
			fmt.Fprintf(w, "gotok: checking the partial download of %s\n", p.File)
		}
	default:
		return false
	}
	return true
}

// humanBytes writes a size as ls -h does, in binary units.
func humanBytes(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	v, i := float64(n)/unit, 0
	for v >= unit && i < 4 {
		v /= unit
		i++
	}
	return fmt.Sprintf("%.1f %ciB", v, "KMGTP"[i])
}
