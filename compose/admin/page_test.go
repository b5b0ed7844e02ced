package admin

import (
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/shoal-mqtt/shoal/gateway"
)

// fakeGateway serves clients; EachTenant counts one connection each.
type fakeGateway []gateway.ClientInfo

// ClientsPage leaves the page to the admin API's cut, which the
// gateway's own paging must agree with (TestClientsPage in gateway/).
func (f fakeGateway) ClientsPage(tenant string, all bool, p gateway.ClientPage) ([]gateway.ClientInfo, bool) {
	var out []Client
	for _, c := range f {
		if all || c.Tenant == tenant {
			out = append(out, Client{Tenant: c.Tenant, ClientID: c.ClientID})
		}
	}
	slices.SortFunc(out, comparePage)
	page, more := cut(out, Page{Search: p.Search, AfterTenant: p.AfterTenant, AfterClient: p.AfterClient, Limit: p.Limit})
	var infos []gateway.ClientInfo
	for _, c := range page {
		infos = append(infos, gateway.ClientInfo{Tenant: c.Tenant, ClientID: c.ClientID})
	}
	return infos, more
}

func (f fakeGateway) Client(tenant, id string) (gateway.ClientInfo, bool) {
	for _, c := range f {
		if c.Tenant == tenant && c.ClientID == id {
			return c, true
		}
	}
	return gateway.ClientInfo{}, false
}

func (f fakeGateway) EachTenant(func(string, *gateway.Stats)) {}

// TestPagesMergeAcrossGateways: keyset pages of two gateways' clients,
// asked through the client, list every client once, in order, and say
// when more follow; search= keeps the ids that hold it, in any case.
func TestPagesMergeAcrossGateways(t *testing.T) {
	var a, b fakeGateway
	var want []string
	for i := range 25 {
		id := fmt.Sprintf("acme-dev%02d", i)
		c := gateway.ClientInfo{Tenant: "acme", ClientID: id}
		if i%3 == 0 {
			a = append(a, c)
		} else {
			b = append(b, c)
		}
		want = append(want, id)
	}
	c := &APIClient{Servers: []string{serve(t, Roles{Gateway: a}), serve(t, Roles{Gateway: b})}, Token: "secret"}
	var got []string
	p := Page{Limit: 10}
	for pages := 0; pages < 10; pages++ {
		rows, more, err := c.ClientsPage(t.Context(), Scope{Tenant: "acme"}, p)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range rows {
			got = append(got, r.ClientID)
		}
		if !more {
			break
		}
		if len(rows) != 10 {
			t.Fatalf("page %d: %d rows and more, want 10", pages, len(rows))
		}
		p.AfterTenant, p.AfterClient = rows[len(rows)-1].Tenant, rows[len(rows)-1].ClientID
	}
	if !slices.Equal(got, want) {
		t.Fatalf("pages gave\n%v\nwant\n%v", got, want)
	}
	// dns+ servers stand for the addresses their names resolve to (an IP
	// literal resolves to itself).
	viaDNS := &APIClient{Servers: []string{DNSPrefix + c.Servers[0], DNSPrefix + strings.TrimPrefix(c.Servers[1], "http://")}, Token: "secret"}
	if rows, _, err := viaDNS.ClientsPage(t.Context(), Scope{Tenant: "acme"}, Page{}); err != nil || len(rows) != len(want) {
		t.Fatalf("through dns+ servers: %d clients, %v; want %d", len(rows), err, len(want))
	}
	rows, more, err := c.ClientsPage(t.Context(), Scope{AllTenants: true}, Page{Search: "DEV1", Limit: 100})
	if err != nil || more || len(rows) != 10 || rows[0].ClientID != "acme-dev10" {
		t.Fatalf("search DEV1: %d rows (more %v, %v), want acme-dev10 to 19", len(rows), more, err)
	}
	resp, err := http.Get(c.Servers[0] + "/v1/clients?tenant=acme&limit=0")
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("no token: %s", resp.Status)
	}
	req, _ := http.NewRequest(http.MethodGet, c.Servers[0]+"/v1/clients?tenant=acme&limit=5000", nil)
	req.Header.Set("Authorization", "Bearer secret")
	resp, err = http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusBadRequest {
		t.Fatalf("limit=5000: %s, want 400", resp.Status)
	}
}
