package console

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"github.com/shoal-mqtt/shoal/compose/admin"
	"github.com/shoal-mqtt/shoal/compose/broker"
	"github.com/shoal-mqtt/shoal/compose/replay"
	"github.com/shoal-mqtt/shoal/internal/watchfile"
)

// UI is the console as the broker serves it on admin.listen
// (broker.WithAdminUI): it asks this process's roles through the admin
// API in process and admin.console_servers over HTTP with the same
// token, reads the event log as shoal replay does, and keeps
// admin.console_tokens_file in force, reloading it when it changes.
func UI(ctx context.Context, p broker.AdminUIParams) (http.Handler, func() error, error) {
	cfg := p.Config
	opt := Options{
		API: &admin.APIClient{
			Servers: append([]string{admin.LocalServer}, cfg.Admin.ConsoleServers...),
			Token:   p.Token,
			HTTP:    &http.Client{Transport: admin.LocalTransport(p.API, nil), Timeout: 15 * time.Second},
		},
		AdminToken:      p.Token,
		TenantSeparator: cfg.Gateway.TenantSeparator,
		Log:             p.Log,
		OpenLog: func(ctx context.Context) (*replay.Log, error) {
			return replay.OpenAs(ctx, cfg, "shoal-console", p.Log)
		},
	}
	if path := cfg.Admin.ConsoleTokensFile; path != "" {
		f, err := watchfile.Open(path, "console tokens file", ParseTenantTokens,
			func(t *TenantTokens) []any { return []any{"tokens", t.Len()} }, p.Log)
		if err != nil {
			return nil, nil, fmt.Errorf("admin.console_tokens_file: %w", err)
		}
		go f.Watch(ctx, 2*time.Second)
		opt.Tenants = f
	}
	c, err := New(opt)
	if err != nil {
		return nil, nil, err
	}
	return c.Handler(), c.Close, nil
}
