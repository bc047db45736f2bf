package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"strings"
)

// noticeHandler prints log records as plain lines for a terminal,
// "gotok: running on the CPU (reason: ...)": no time stamps or levels.
type noticeHandler struct {
	w     io.Writer
	level slog.Level
	attrs []slog.Attr
}

func (h *noticeHandler) Enabled(_ context.Context, l slog.Level) bool { return l >= h.level }

func (h *noticeHandler) Handle(_ context.Context, r slog.Record) error {
	var b strings.Builder
	b.WriteString("gotok: ")
	b.WriteString(r.Message)
	var attrs []string
	add := func(a slog.Attr) bool {
		attrs = append(attrs, fmt.Sprintf("%s: %v", a.Key, a.Value))
		return true
	}
	for _, a := range h.attrs {
		add(a)
	}
	r.Attrs(add)
	if len(attrs) > 0 {
		b.WriteString(" (" + strings.Join(attrs, ", ") + ")")
	}
	b.WriteByte('\n')
	_, err := io.WriteString(h.w, b.String())
	return err
}

func (h *noticeHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	c := *h
	c.attrs = append(append([]slog.Attr(nil), h.attrs...), attrs...)
	return &c
}

func (h *noticeHandler) WithGroup(string) slog.Handler { return h }
