// Package testlog gives tests a logger whose output they can read.
package testlog

import (
	"bytes"
	"log/slog"
	"sync"
)

// Buffer holds what a logger wrote. It is safe for concurrent use, as the
// loggers of concurrent invocations need.
type Buffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

// Write implements io.Writer.
func (b *Buffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

// String returns everything written so far.
func (b *Buffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// Text returns a logger of every level, in slog's text format, and the
// buffer it writes to.
func Text() (*slog.Logger, *Buffer) {
	var b Buffer
	return slog.New(slog.NewTextHandler(&b, &slog.HandlerOptions{Level: slog.LevelDebug})), &b
}

// JSON returns a logger of every level, one JSON object a line, and the
// buffer it writes to.
func JSON() (*slog.Logger, *Buffer) {
	var b Buffer
	return slog.New(slog.NewJSONHandler(&b, &slog.HandlerOptions{Level: slog.LevelDebug})), &b
}
