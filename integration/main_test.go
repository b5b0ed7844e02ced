//go:build integration

package integration

import (
	"context"
	"fmt"
	"os"
	"sync"
	"testing"

	"github.com/shoal-mqtt/shoal/integration/servers"
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

// serverChoice is how this test binary gets its Kafka and CQL database,
// decided once, on first use.
var serverChoice struct {
	once sync.Once
	mode servers.Mode
	line string
	err  error
}

// serverMode returns the servers' mode (servers.Choose: containers when a
// Docker engine answers, local processes otherwise, unless
// SHOAL_IT_SERVERS says) and logs why.
func serverMode(t *testing.T) servers.Mode {
	t.Helper()
	serverChoice.once.Do(func() {
		sc := &serverChoice
		sc.mode, sc.line, sc.err = servers.Choose(context.Background(), os.Getenv(servers.EnvMode), servers.DockerEngine)
		if sc.err == nil {
			fmt.Fprintf(os.Stderr, "integration: %s\n", sc.line)
		}
	})
	if serverChoice.err != nil {
		t.Fatal(serverChoice.err)
	}
	t.Log(serverChoice.line)
	return serverChoice.mode
}

// skipWithContainers skips a scenario that needs to stop and restart
// Kafka, which works with the local process only: a container restarted
// gets new host ports, while the broker's advertised listener and the
// addresses the clients (and the shoal processes) hold keep the old one.
func skipWithContainers(t *testing.T) {
	t.Helper()
	if serverMode(t) == servers.Containers {
		t.Skip("container mode: a restarted Kafka container gets new host ports (its advertised listener and every client's broker address would be stale); this scenario runs with the local Kafka process only")
	}
}

// imageFrom returns the image named by the environment variable env, or
// def.
func imageFrom(env, def string) string {
	if v := os.Getenv(env); v != "" {
		return v
	}
	return def
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
