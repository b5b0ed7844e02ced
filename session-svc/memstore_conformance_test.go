package sessionsvc_test

import (
	"testing"

	sessionsvc "github.com/shoal-mqtt/shoal/session-svc"
	"github.com/shoal-mqtt/shoal/session-svc/storetest"
)

// The unit tests' in-memory store keeps the contract of the real ones.
func TestMemStoreConformance(t *testing.T) {
	storetest.Run(t, storetest.Harness{
		Open: func(*testing.T) sessionsvc.Store { return sessionsvc.NewMemStore() },
	})
}
