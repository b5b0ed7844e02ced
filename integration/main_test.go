//go:build integration

package integration

import (
	"os"
	"sync"
	"testing"
)

// The servers are started once per test binary, on first use, and stopped
// after the last test: each takes seconds to start.
var (
	exitMu    sync.Mutex
	exitFuncs []func()
)

// atExit registers f to run after every test has finished, in reverse
// order of registration.
func atExit(f func()) {
	exitMu.Lock()
	defer exitMu.Unlock()
	exitFuncs = append(exitFuncs, f)
}

func TestMain(m *testing.M) {
	code := m.Run()
	exitMu.Lock()
	fs := exitFuncs
	exitMu.Unlock()
	for i := len(fs) - 1; i >= 0; i-- {
		fs[i]()
	}
	os.Exit(code)
}
