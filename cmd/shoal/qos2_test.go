package main

import (
	"testing"

	"github.com/shoal-mqtt/shoal/internal/testutil/qos2resend"
)

// TestQoS2ExactlyOnceAcrossReconnect is issue 12 §1: a persistent publisher
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
