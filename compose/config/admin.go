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
