package broker_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/eclipse/paho.golang/paho"

	"github.com/shoal-mqtt/shoal/compose/admin"
	"github.com/shoal-mqtt/shoal/compose/broker"
	"github.com/shoal-mqtt/shoal/compose/config"
	"github.com/shoal-mqtt/shoal/internal/mqtt/packet"
	"github.com/shoal-mqtt/shoal/internal/testutil/eventually"
)

// startAdmin starts shoal all and returns it with a client of its admin
// API, authenticated by the token it made in its data directory.
func startAdmin(t *testing.T) (*broker.Broker, *admin.APIClient, string) {
	t.Helper()
	var dir string
	b := startBroker(t, func(c *config.Config) { dir = c.DataDir })
	path := filepath.Join(dir, admin.TokenFileName)
	st, err := os.Stat(path)
	if err != nil {
		t.Fatalf("admin token: %v", err)
	}
	if st.Mode().Perm() != 0o600 {
		t.Errorf("admin token mode %v, want 0600", st.Mode().Perm())
	}
	tok, err := admin.ReadToken(path)
	if err != nil {
		t.Fatal(err)
	}
	return b, &admin.APIClient{Servers: []string{b.Addr("admin").String()}, Token: tok}, dir
}

func persistent(cp *paho.Connect) {
	cp.CleanStart = false
	cp.Properties = &paho.ConnectProperties{SessionExpiryInterval: u32(300)}
}

func TestAdminListsPerTenant(t *testing.T) {
	b, c, _ := startAdmin(t)
	ctx := t.Context()
	a1, _ := dialV5(t, mqttAddr(b), "acme-a1", persistent)
	a1.subscribe(t, pahoSub("room/+/temp", 1))
	g1, _ := dialV5(t, mqttAddr(b), "globex-g1")
	g1.subscribe(t, pahoSub("room/#", 0))
	a1.publish(t, &paho.Publish{Topic: "room/1/temp", Payload: []byte("21.5"), QoS: 1, Retain: true})
	g1.publish(t, &paho.Publish{Topic: "room/9/temp", Payload: []byte("secret"), QoS: 1, Retain: true})

	acme := admin.Scope{Tenant: "acme"}
	clients, err := c.Clients(ctx, acme, "")
	if err != nil {
		t.Fatal(err)
	}
	if len(clients) != 1 || clients[0].ClientID != "acme-a1" || clients[0].Tenant != "acme" ||
		clients[0].ProtocolVersion != 5 || clients[0].Listener != "mqtt" || clients[0].Subscriptions != 1 || clients[0].Address == "" {
		t.Errorf("clients of acme = %+v, want acme-a1 alone, 5.0 on mqtt with one subscription", clients)
	}
	all, err := c.Clients(ctx, admin.Scope{AllTenants: true}, "")
	if err != nil {
		t.Fatal(err)
	}
	if ids := clientIDs(all); !slices.Equal(ids, []string{"acme-a1", "globex-g1"}) {
		t.Errorf("clients of every tenant = %v", ids)
	}

	sessions, err := c.Sessions(ctx, acme, "")
	if err != nil {
		t.Fatal(err)
	}
	if len(sessions) != 1 || sessions[0].ClientID != "acme-a1" || sessions[0].State != "connected" || sessions[0].ExpiryS != 300 {
		t.Errorf("sessions of acme = %+v, want acme-a1 connected, expiry 300", sessions)
	}
	eventually.OK(t, wait, func() string {
		s, err := c.Sessions(ctx, acme, "acme-a1")
		if err != nil || len(s) != 1 || len(s[0].Filters) != 1 || s[0].Filters[0].Filter != "room/+/temp" {
			return "session acme-a1 shows no subscription room/+/temp"
		}
		return ""
	})

	eventually.OK(t, wait, func() string {
		subs, err := c.Subscriptions(ctx, acme, "", "")
		if err != nil {
			return err.Error()
		}
		if len(subs) != 1 || subs[0].ClientID != "acme-a1" || subs[0].Filter != "room/+/temp" || subs[0].QoS != 1 {
			return "subscriptions of acme: " + spew(subs)
		}
		return ""
	})
	eventually.OK(t, wait, func() string {
		ret, err := c.Retained(ctx, acme, "room/#")
		if err != nil {
			return err.Error()
		}
		if len(ret) != 1 || ret[0].Topic != "room/1/temp" || ret[0].Payload != "21.5" || ret[0].Tenant != "acme" {
			return "retained of acme: " + spew(ret)
		}
		return ""
	})
	// Another tenant's listing never shows acme's state, and the reverse.
	gsubs, err := c.Subscriptions(ctx, admin.Scope{Tenant: "globex"}, "", "")
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range gsubs {
		if s.Tenant != "globex" {
			t.Errorf("globex's subscriptions show %+v", s)
		}
	}
	// globex's retained message is on another shard than acme's, which
	// may not have applied it yet: wait for it, and for it alone.
	eventually.OK(t, wait, func() string {
		gret, err := c.Retained(ctx, admin.Scope{Tenant: "globex"}, "#")
		if err != nil {
			return err.Error()
		}
		if len(gret) != 1 || gret[0].Payload != "secret" || gret[0].Tenant != "globex" {
			return "globex's retained messages, want its own alone: " + spew(gret)
		}
		return ""
	})
	gsess, err := c.Sessions(ctx, admin.Scope{Tenant: "globex"}, "acme-a1")
	if err != nil || len(gsess) != 0 {
		t.Errorf("acme-a1 asked as globex's: %v %v, want nothing", gsess, err)
	}
}

func clientIDs(cs []admin.Client) []string {
	var ids []string
	for _, c := range cs {
		ids = append(ids, c.ClientID)
	}
	return ids
}

func spew(v any) string {
	var buf bytes.Buffer
	_ = outputJSON(&buf, v)
	return buf.String()
}

func TestAdminKick(t *testing.T) {
	b, c, _ := startAdmin(t)
	ctx := t.Context()
	// 5.0: DISCONNECT 0x98 Administrative Action.
	v5, _ := dialV5(t, mqttAddr(b), "acme-v5")
	if _, err := c.Kick(ctx, "acme", "acme-v5"); err != nil {
		t.Fatal(err)
	}
	select {
	case d := <-v5.disc:
		if d.ReasonCode != byte(packet.CodeAdministrativeAction) {
			t.Errorf("DISCONNECT reason 0x%02X, want 0x98", d.ReasonCode)
		}
	case <-time.After(wait):
		t.Fatal("no DISCONNECT after kick")
	}
	// 3.1.1: the connection is closed, without a DISCONNECT.
	v3 := dialRaw(t, mqttAddr(b), packet.V311)
	if ca := v3.connect(&packet.Connect{ClientID: []byte("acme-v3"), CleanStart: true, KeepAlive: 30}); ca.Code != 0 {
		t.Fatalf("CONNACK %v", ca.Code)
	}
	if _, err := c.Kick(ctx, "acme", "acme-v3"); err != nil {
		t.Fatal(err)
	}
	if d := v3.expectClosed(wait); d != nil {
		t.Errorf("3.1.1 connection got a DISCONNECT %v", d)
	}
	// Unknown clients and other tenants' clients are not kicked.
	if _, err := c.Kick(ctx, "acme", "acme-nobody"); err == nil || !strings.Contains(err.Error(), "no session") {
		t.Errorf("kick of an unknown client: %v, want no session", err)
	}
	g, _ := dialV5(t, mqttAddr(b), "globex-g")
	if _, err := c.Kick(ctx, "acme", "globex-g"); err == nil {
		t.Error("globex-g kicked as a client of acme")
	}
	select {
	case d := <-g.disc:
		t.Errorf("globex-g got DISCONNECT 0x%02X", d.ReasonCode)
	case <-time.After(200 * time.Millisecond):
	}
}

func TestAdminDeleteRetained(t *testing.T) {
	b, c, _ := startAdmin(t)
	ctx := t.Context()
	pub, _ := dialV5(t, mqttAddr(b), "acme-pub")
	pub.publish(t, &paho.Publish{Topic: "status/door", Payload: []byte("open"), QoS: 1, Retain: true})
	pub.publish(t, &paho.Publish{Topic: "status/window", Payload: []byte("shut"), QoS: 1, Retain: true})
	watcher, _ := dialV5(t, mqttAddr(b), "acme-watcher")
	watcher.subscribe(t, pahoSub("status/door", 1))
	if m := watcher.expect(t); string(m.Payload) != "open" {
		t.Fatalf("retained %q, want open", m.Payload)
	}
	eventually.OK(t, wait, func() string {
		if _, err := c.DeleteRetained(ctx, "acme", "status/door"); err != nil {
			return err.Error()
		}
		return ""
	})
	eventually.OK(t, wait, func() string {
		ret, err := c.Retained(ctx, admin.Scope{Tenant: "acme"}, "status/#")
		if err != nil || len(ret) != 1 || ret[0].Topic != "status/window" {
			return "retained after deletion: " + spew(ret)
		}
		return ""
	})
	// A new subscriber gets nothing; the one subscribed got no empty message.
	late, _ := dialV5(t, mqttAddr(b), "acme-late")
	late.subscribe(t, pahoSub("status/door", 1))
	late.expectNone(t, 300*time.Millisecond)
	watcher.expectNone(t, 0)
	if _, err := c.DeleteRetained(ctx, "acme", "status/door"); err == nil || !strings.Contains(err.Error(), "no retained message") {
		t.Errorf("second deletion: %v, want no retained message", err)
	}
}

func TestAdminDeleteSession(t *testing.T) {
	b, c, _ := startAdmin(t)
	ctx := t.Context()
	cl, ca := dialV5(t, mqttAddr(b), "acme-p", persistent)
	if ca.SessionPresent {
		t.Fatal("new session present")
	}
	cl.subscribe(t, pahoSub("a/b", 1))
	if _, err := c.DeleteSession(ctx, "acme", "acme-p"); err != nil {
		t.Fatal(err)
	}
	select {
	case d := <-cl.disc:
		if d.ReasonCode != byte(packet.CodeAdministrativeAction) {
			t.Errorf("DISCONNECT reason 0x%02X, want 0x98", d.ReasonCode)
		}
	case <-time.After(wait):
		t.Fatal("no DISCONNECT after the session's deletion")
	}
	eventually.OK(t, wait, func() string {
		s, err := c.Sessions(ctx, admin.Scope{Tenant: "acme"}, "")
		if err != nil || len(s) != 0 {
			return "sessions after deletion: " + spew(s)
		}
		return ""
	})
	_, ca = dialV5(t, mqttAddr(b), "acme-p", persistent)
	if ca.SessionPresent {
		t.Error("reconnect after deletion: session present, want a new session")
	}
	eventually.OK(t, wait, func() string {
		subs, err := c.Subscriptions(ctx, admin.Scope{Tenant: "acme"}, "acme-p", "")
		if err != nil || len(subs) != 0 {
			return "subscriptions after deletion: " + spew(subs)
		}
		return ""
	})
}

func TestAdminWrongToken(t *testing.T) {
	b, c, _ := startAdmin(t)
	for _, tok := range []string{"", "wrong", c.Token + "x"} {
		req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, "http://"+b.Addr("admin").String()+"/v1/clients?all_tenants=true", nil)
		if err != nil {
			t.Fatal(err)
		}
		if tok != "" {
			req.Header.Set("Authorization", "Bearer "+tok)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_ = resp.Body.Close()
		if resp.StatusCode != http.StatusUnauthorized {
			t.Errorf("token %q: status %d, want 401", tok, resp.StatusCode)
		}
	}
	bad := &admin.APIClient{Servers: c.Servers, Token: "wrong"}
	if _, err := bad.Clients(context.Background(), admin.Scope{AllTenants: true}, ""); err == nil || !strings.Contains(err.Error(), "401") {
		t.Errorf("client with a wrong token: %v, want 401", err)
	}
	// The admin API is not served on the MQTT listener, nor on /metrics'.
	resp, err := http.Get("http://" + b.Addr("http").String() + "/v1/roles")
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound {
		t.Errorf("/v1/roles on http_listen: %d, want 404", resp.StatusCode)
	}
}

func outputJSON(w *bytes.Buffer, v any) error {
	enc := json.NewEncoder(w)
	return enc.Encode(v)
}
