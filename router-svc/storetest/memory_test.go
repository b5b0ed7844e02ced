package storetest_test

import (
	"testing"

	routersvc "github.com/shoal-mqtt/shoal/router-svc"
	"github.com/shoal-mqtt/shoal/router-svc/storetest"
)

func TestMemory(t *testing.T) {
	storetest.Run(t, storetest.Harness{
		Open:   func(*testing.T) routersvc.Store { return storetest.NewMemory() },
		Reopen: func(_ *testing.T, s routersvc.Store) routersvc.Store { return s },
	})
}
