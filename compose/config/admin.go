package config

import (
	"fmt"
	"net"
)

// Admin configures the admin HTTP API of a role (compose/admin), which
// `shoal ctl` talks to.
type Admin struct {
	// Listen is the API's own listener, never one of the MQTT listeners;
	// "" disables the API. Loopback by default.
	Listen string `yaml:"listen"`
	// TokenFile holds the bearer token every request must carry (its
	// first line). Empty: `shoal all` makes a random token at its first
	// start in data_dir/admin.token (mode 0600), which `shoal ctl
	// --data-dir` reads; a role of a distributed deployment serves no
	// admin API without one.
	TokenFile string `yaml:"token_file"`
}

// DefaultAdmin is loopback only, with the token shoal all makes.
func DefaultAdmin() Admin { return Admin{Listen: "127.0.0.1:9091"} }

// Serves reports whether a process serves the admin API: admin.listen is
// set and a token is at hand, admin.token_file's or, for shoal all (all),
// the one it makes in its data directory.
func (a Admin) Serves(all bool) bool { return a.Listen != "" && (a.TokenFile != "" || all) }

// Validate checks admin.listen.
func (a Admin) Validate() error {
	if a.Listen == "" {
		return nil
	}
	if _, _, err := net.SplitHostPort(a.Listen); err != nil {
		return fmt.Errorf("admin.listen: %q is not host:port: %w", a.Listen, err)
	}
	return nil
}
