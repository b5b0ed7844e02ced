package pahoconn

import (
	"context"
	"net"
	"testing"
	"time"

	"github.com/eclipse/paho.golang/paho"
)

// Connect connects an MQTT 5 client id to addr with a clean start and a
// 30 s keepalive, handing every message it receives to onPublish (nil:
// none); the test's end disconnects it.
func Connect(t testing.TB, addr, id string, onPublish func(*paho.Publish)) *paho.Client {
	t.Helper()
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	cfg := paho.ClientConfig{Conn: nc, OnClientError: func(error) {}}
	if onPublish != nil {
		cfg.OnPublishReceived = []func(paho.PublishReceived) (bool, error){func(pr paho.PublishReceived) (bool, error) {
			onPublish(pr.Packet)
			return true, nil
		}}
	}
	c := paho.NewClient(cfg)
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	if _, err := c.Connect(ctx, &paho.Connect{ClientID: id, CleanStart: true, KeepAlive: 30}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Disconnect(&paho.Disconnect{}) })
	return c
}
