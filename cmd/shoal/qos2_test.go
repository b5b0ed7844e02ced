package main

import (
	"testing"

	"github.com/shoal-mqtt/shoal/internal/testutil/qos2resend"
)

// TestQoS2ExactlyOnceAcrossReconnect: a persistent publisher
// sends six QoS 2 messages, loses its connection before it reads the
// PUBRECs, resumes its session and sends them again with DUP, as MQTT
// requires; its subscribers get each message once. With Paho's 3.1.1 and
// 5.0 clients, with the same shoal all process, and with a kill -9 and a
// restart between the drop and the resend (the packet identifiers awaiting
// PUBREL are session state that survives it).
func TestQoS2ExactlyOnceAcrossReconnect(t *testing.T) {
	for _, tc := range []struct {
		name    string
		version int
		restart bool
	}{
		{"3.1.1", 4, false},
		{"5.0", 5, false},
		{"3.1.1/kill-9", 4, true},
		{"5.0/kill-9", 5, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			dumpLogs(t, dir)
			p := startShoal(t, dir)
			proxy := qos2resend.NewProxy(t, p.mqtt)
			s := qos2resend.Scenario{
				Version: tc.version, ClientID: "eo-pub", Topic: "eo/t", N: 6, Proxy: proxy,
				SubscriberAddr: func() string { return p.mqtt },
			}
			if tc.restart {
				s.Between = func() bool {
					p.kill()
					p = startShoal(t, dir)
					proxy.SetTarget(p.mqtt)
					return true
				}
			}
			s.Run(t)
		})
	}
}

// TestQoS2PersistedClient is the persistence test of a client library's
// own suite: a client subscribed to its own topic at QoS 2 sends messages,
// disconnects before it reads the PUBRECs and the deliveries, and a new
// client object from the same file store resumes the session (in 5.0 with
// a session expiry of 0 on that connect) and resends them. It and an
// observer get each message exactly once.
func TestQoS2PersistedClient(t *testing.T) {
	for _, v := range []int{4, 5} {
		t.Run(map[int]string{4: "3.1.1", 5: "5.0"}[v], func(t *testing.T) {
			dir := t.TempDir()
			dumpLogs(t, dir)
			p := startShoal(t, dir)
			qos2resend.Persisted{
				Version: v, ClientID: "eo-persist", Topic: "eo/persist", N: 6,
				Proxy: qos2resend.NewProxy(t, p.mqtt), ObserverAddr: p.mqtt, Dir: t.TempDir(),
			}.Run(t)
		})
	}
}
