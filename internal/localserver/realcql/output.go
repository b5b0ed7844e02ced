package realcql

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"sync"
)

// output receives the node's stdout and stderr: it copies them to the
// caller's writer and to a log file, and keeps the latest bytes for error
// messages.
type output struct {
	mu     sync.Mutex
	w      io.Writer // nil: none
	f      *os.File  // nil once closed
	tail   []byte    // the latest output, at most 4*tailBytes
	marked int       // len(tail) at the last mark, -1 once trimmed past it
}

func newOutput(path string, w io.Writer) (*output, error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, fmt.Errorf("open node log: %w", err)
	}
	return &output{w: w, f: f}, nil
}

// Write never fails: the node must not block or die because a log sink
// did.
func (o *output) Write(p []byte) (int, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.f != nil {
		_, _ = o.f.Write(p) // best effort: the file is for people
	}
	if o.w != nil {
		_, _ = o.w.Write(p) // best effort, as above
	}
	o.tail = append(o.tail, p...)
	if over := len(o.tail) - 4*tailBytes; over > 0 {
		o.tail = append(o.tail[:0], o.tail[over:]...)
		o.marked -= over
		if o.marked < 0 {
			o.marked = -1
		}
	}
	return len(p), nil
}

// mark remembers the current end of the output for sinceMark.
func (o *output) mark() {
	o.mu.Lock()
	o.marked = len(o.tail)
	o.mu.Unlock()
}

// sinceMark reports whether the output since the last mark (or the part of
// it still kept) contains any of subs.
func (o *output) sinceMark(subs ...string) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	from := max(o.marked, 0)
	for _, s := range subs {
		if bytes.Contains(o.tail[from:], []byte(s)) {
			return true
		}
	}
	return false
}

// tailSuffix returns the latest output as a suffix for an error message.
func (o *output) tailSuffix() string {
	o.mu.Lock()
	defer o.mu.Unlock()
	t := o.tail
	if len(t) > tailBytes {
		t = t[len(t)-tailBytes:]
		if i := bytes.IndexByte(t, '\n'); i >= 0 {
			t = t[i+1:]
		}
	}
	if len(t) == 0 {
		return ""
	}
	return "\n--- latest output of the node ---\n" + string(bytes.TrimRight(t, "\n"))
}

// close closes the log file; later output goes only to the writer.
func (o *output) close() error {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.f == nil {
		return nil
	}
	err := o.f.Close()
	o.f = nil
	if err != nil {
		return fmt.Errorf("close node log: %w", err)
	}
	return nil
}
