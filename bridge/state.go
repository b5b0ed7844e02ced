package bridge

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"strconv"

	"github.com/shoal-mqtt/shoal/kafka"
)

// The out direction's exactly-once state: a client may send a QoS 2 PUBLISH
// again, after a reconnect, until it got PUBREC. The gateway then writes the
// message to shoal.messages a second time, with the same packet identifier
// and session generation; the routers drop the repeat (router-svc
// unreleased.go), and so must the bridge, which reads the log itself. It
// keeps, per partition of shoal.messages, the identifiers it bridged and
// their clients have not released (PublishRelease, or the session's end),
// as the router shard of that partition does.
//
// The state must hold at the offset the bridge resumes from, after a crash
// or when another instance takes the partition over: so every change is
// written to StateTopic (compacted; key tenant/client/packet id, value the
// session generation, a tombstone when it is forgotten) in the transaction
// of the poll that made it, beside the poll's records and offsets. A
// partition's state is read back (kafka.Client.ReadCommitted) before its
// first poll is handled, which comes after the group's committed offsets
// were fetched: the transaction that committed them, and its state, are
// then in the log. Only identifiers of messages the bridge wrote somewhere
// are kept: a repeat of a message no mapping takes is dropped anyway.

// clientKey names a client of a tenant.
type clientKey struct{ tenant, client string }

// partState is one partition's kept identifiers, by client, each with the
// generation of the session that sent it.
type partState map[clientKey]map[uint16]uint64

// forget drops c's identifier id.
func (st partState) forget(c clientKey, id uint16) {
	ids := st[c]
	delete(ids, id)
	if len(ids) == 0 {
		delete(st, c)
	}
}

// stateKey is the record key of c's identifier id: the client's record key
// (tenant/client, kafka.AppendKey), '#', the packet identifier.
func stateKey(c clientKey, id uint16) []byte {
	key := kafka.AppendKey(nil, c.tenant, c.client)
	key = append(key, '#')
	return strconv.AppendUint(key, uint64(id), 10)
}

// parseStateKey reads a stateKey.
func parseStateKey(key []byte) (clientKey, uint16, error) {
	i := bytes.LastIndexByte(key, '#')
	if i < 0 {
		return clientKey{}, 0, fmt.Errorf("bridge state key %q: no packet identifier", key)
	}
	id, err := strconv.ParseUint(string(key[i+1:]), 10, 16)
	if err != nil || id == 0 {
		return clientKey{}, 0, fmt.Errorf("bridge state key %q: packet identifier %q", key, key[i+1:])
	}
	tenant, client, err := kafka.SplitKey(key[:i])
	if err != nil {
		return clientKey{}, 0, fmt.Errorf("bridge state key %q: %w", key, err)
	}
	return clientKey{tenant: string(tenant), client: string(client)}, uint16(id), nil
}

// stateRecord is the StateTopic record of c's identifier id kept for
// generation gen, or its tombstone (forget).
func (b *Bridge) stateRecord(part int32, c clientKey, id uint16, gen uint64, forget bool) *kafka.Record {
	r := &kafka.Record{Topic: StateTopic, Partition: part, Key: stateKey(c, id)}
	if !forget {
		r.Value = binary.AppendUvarint(nil, gen)
	}
	return r
}

// loadState reads partition part's kept identifiers from StateTopic.
func (b *Bridge) loadState(ctx context.Context, part int32) (partState, error) {
	st := make(partState)
	err := b.users().ReadCommitted(ctx, StateTopic, part, func(r *kafka.Record) error {
		c, id, err := parseStateKey(r.Key)
		if err != nil {
			return err
		}
		if r.Value == nil {
			st.forget(c, id)
			return nil
		}
		gen, n := binary.Uvarint(r.Value)
		if n <= 0 {
			return fmt.Errorf("bridge state %q: bad generation", r.Key)
		}
		ids := st[c]
		if ids == nil {
			ids = make(map[uint16]uint64)
			st[c] = ids
		}
		ids[id] = gen
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("load bridge state of partition %d: %w", part, err)
	}
	return st, nil
}
