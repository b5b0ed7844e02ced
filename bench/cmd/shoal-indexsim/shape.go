package main

import (
	"strconv"

	"github.com/shoal-mqtt/shoal/kafka"
)

// shape names the simulated index's clients, filters and topics as
// shoal-distbench's index ceiling names them, so that the figures compare
// with bench/router-index.json: bench/load's connections scenario gives
// connection i of prefix p the client id "p-c-i" and its filter j
// "p/sub/i/j", or "p/sub/i/j/+" with wildcards, and the ceiling's
// prefixes are "bench-ixc" (concrete) and "bench-ixw" (wildcard). The
// gateway's tenant is the client id up to its first '-': "bench". With
// several tenants, tenant k > 0 is "bench{k}" and holds every k-th
// client.
type shape struct {
	tenants    []string
	partitions int32
	// perConcrete and perWildcard are the filters of each client.
	perConcrete, perWildcard int

	buf, key []byte // scratch
}

// The kinds of names: a connection's prefix after its tenant.
const (
	kindConcrete = "-ixc"
	kindWildcard = "-ixw"
	kindOutside  = "-ixm"
)

func newShape(opt options) *shape {
	s := &shape{
		partitions:  int32(opt.Partitions),
		perConcrete: perClient(opt.Concrete, opt.Clients),
		perWildcard: perClient(opt.Wildcard, opt.Clients),
	}
	s.tenants = append(s.tenants, "bench")
	for k := 1; k < opt.Tenants; k++ {
		s.tenants = append(s.tenants, "bench"+strconv.Itoa(k))
	}
	return s
}

// perClient is the filters of each of clients holding filters between
// them, as the load generator spreads them: the same number each, the
// last clients left without any when clients does not divide filters.
func perClient(filters, clients int) int {
	return max(1, (filters+clients-1)/clients)
}

// filter returns the n-th filter of kind (concrete or wildcard): its
// tenant, its client's id, the filter and its client's index.
func (s *shape) filter(kind string, n int) (tenant, client, filter string, i int) {
	per, wild := s.perConcrete, false
	if kind == kindWildcard {
		per, wild = s.perWildcard, true
	}
	i, j := n/per, n%per
	tenant = s.tenants[i%len(s.tenants)]
	s.buf = append(append(s.buf[:0], tenant...), kind...)
	p := len(s.buf)
	s.buf = append(s.buf, "-c-"...)
	s.buf = strconv.AppendInt(s.buf, int64(i), 10)
	client = string(s.buf)
	s.buf = append(s.buf[:p], "/sub/"...)
	s.buf = strconv.AppendInt(s.buf, int64(i), 10)
	s.buf = append(s.buf, '/')
	s.buf = strconv.AppendInt(s.buf, int64(j), 10)
	if wild {
		s.buf = append(s.buf, "/+"...)
	}
	return tenant, client, string(s.buf), i
}

// outside returns the n-th topic that no filter of the index matches,
// and its tenant: the load generator's pairs topics ("p/pairs/n"), which
// the index ceiling's match phases publish to.
func (s *shape) outside(n int) (tenant, topic string) {
	tenant = s.tenants[n%len(s.tenants)]
	s.buf = append(append(s.buf[:0], tenant...), kindOutside...)
	s.buf = append(s.buf, "/pairs/"...)
	s.buf = strconv.AppendInt(s.buf, int64(n), 10)
	return tenant, string(s.buf)
}

// partition returns the partition of shoal.messages a record about
// tenant's topic or concrete filter goes to, as the gateway computes it:
// a publish (gateway/inbound.go) and a SubscriptionChange of a filter
// without wildcards (conn.appendChange) are keyed kafka.Key(tenant, name).
func (s *shape) partition(tenant, name string) int32 {
	s.key = kafka.AppendKey(s.key[:0], tenant, name)
	return kafka.PartitionForKey(s.key, s.partitions)
}

// connection is the connection id of client i of kind, unique across
// kinds: the route a subscription remembers.
func connection(kind string, i int) uint64 {
	if kind == kindWildcard {
		return 1<<32 + uint64(i) + 1
	}
	return uint64(i) + 1
}
