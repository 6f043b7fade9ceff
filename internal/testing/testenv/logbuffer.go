package testenv

import (
	"strings"
	"sync"
)

// LogBuffer collects what a logger writes from many goroutines (the
// handlers of a server under test, a background loop), for a test to
// read back with String. The zero value is ready to use.
type LogBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

// Write appends p; it never fails.
func (l *LogBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

// String returns everything written so far.
func (l *LogBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
