package servers

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestChoose(t *testing.T) {
	noEngine := func(context.Context) error { return errors.New("rootless Docker not found") }
	engine := func(context.Context) error { return nil }
	for _, tc := range []struct {
		setting string
		probe   func(context.Context) error
		mode    Mode
		line    string // prefix of the line for the output
		err     string // in the error
	}{
		{"", noEngine, Processes, NoDocker + " (rootless Docker not found)", ""},
		{"auto", noEngine, Processes, NoDocker + " (rootless Docker not found)", ""},
		{"", engine, Containers, "Docker engine found: starting Kafka and ScyllaDB as containers", ""},
		{"processes", nil, Processes, "SHOAL_IT_SERVERS=processes: starting Kafka and Cassandra as local processes", ""},
		{"processes", engine, Processes, "SHOAL_IT_SERVERS=processes", ""},
		{"containers", engine, Containers, "SHOAL_IT_SERVERS=containers: starting Kafka and ScyllaDB as containers", ""},
		{"containers", noEngine, "", "", "SHOAL_IT_SERVERS=containers, but no Docker engine answers: rootless Docker not found"},
		{"docker", engine, "", "", `SHOAL_IT_SERVERS="docker": want processes, containers or auto`},
	} {
		probe := tc.probe
		if probe == nil {
			probe = func(context.Context) error {
				t.Errorf("%q: the Docker engine was probed", tc.setting)
				return nil
			}
		}
		mode, line, err := Choose(t.Context(), tc.setting, probe)
		switch {
		case tc.err != "":
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("Choose(%q) error %v, want %q", tc.setting, err, tc.err)
			}
		case err != nil:
			t.Errorf("Choose(%q): %v", tc.setting, err)
		case mode != tc.mode || !strings.HasPrefix(line, tc.line):
			t.Errorf("Choose(%q) = %q, %q; want %q, %q…", tc.setting, mode, line, tc.mode, tc.line)
		}
	}
}

// noDockerHost reports whether none of the places testcontainers-go looks
// for a Docker host exists: DOCKER_HOST, ~/.testcontainers.properties, the
// default socket and the rootless ones.
func noDockerHost(t *testing.T) bool {
	if os.Getenv("DOCKER_HOST") != "" {
		return false
	}
	home, _ := os.UserHomeDir()
	paths := []string{
		"/var/run/docker.sock",
		filepath.Join(home, ".testcontainers.properties"),
		filepath.Join(home, ".docker", "run", "docker.sock"),
		filepath.Join(home, ".docker", "desktop", "docker.sock"),
		filepath.Join(os.Getenv("XDG_RUNTIME_DIR"), "docker.sock"),
		fmt.Sprintf("/run/user/%d/docker.sock", os.Getuid()),
	}
	for _, p := range paths {
		if _, err := os.Stat(p); err == nil {
			t.Logf("%s exists", p)
			return false
		}
	}
	return true
}

// The real probe answers within its timeout; where no Docker host exists
// at all (as on the machines this was written on) it says there is no
// engine, which makes Choose fall back to local processes.
func TestDockerEngine(t *testing.T) {
	began := time.Now()
	err := DockerEngine(t.Context())
	took := time.Since(began)
	t.Logf("DockerEngine: %v, after %s", err, took.Round(time.Millisecond))
	if took > ProbeTimeout+2*time.Second {
		t.Errorf("DockerEngine took %s, want at most its timeout %s", took, ProbeTimeout)
	}
	if noDockerHost(t) && err == nil {
		t.Fatal("DockerEngine found an engine where no Docker host exists")
	}
	mode, line, cerr := Choose(t.Context(), "", func(context.Context) error { return err })
	t.Log(line)
	if cerr != nil || (err != nil) != (mode == Processes) {
		t.Errorf("Choose after DockerEngine %v = %q, %v", err, mode, cerr)
	}
}
