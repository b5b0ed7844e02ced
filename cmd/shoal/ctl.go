package main

import (
	"context"
	"io"

	"github.com/shoal-mqtt/shoal/compose/admin"
)

// runCtl runs `shoal ctl`: the operators' client of the admin API
// (compose/admin holds its logic).
func runCtl(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	return admin.Ctl(ctx, args, stdout, stderr, nil)
}
