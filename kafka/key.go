package kafka

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
)

// Record keys.
//
// A record of a keyed topic is keyed by what it is about: a tenant's topic
// (shoal.messages) or a tenant's client (shoal.sessions, shoal.presence).
// The key is the tenant, '/', and the topic or client id (the rest):
// "acme/sensors/1/temp", "acme/client-7", "/plain" for the default tenant
// "". The key decides the partition (PartitionForKey), so these bytes are
// part of every data directory and cluster already written.
//
// A tenant may itself hold '/', so within the tenant, and only there, '%'
// is written "%25" and '/' "%2F": the first '/' of a key ends the tenant,
// and a key names exactly one tenant and rest. A tenant without '/' or '%'
// (every tenant of a client id that holds neither) is written as it is, so
// its keys are the very bytes releases before this rule wrote. A tenant
// with '/' or '%' was written unescaped by those releases: its records
// written before the upgrade have other keys than the same tenant's
// records written after it (so they may sit in other partitions, and a
// compacted topic keeps both), and SplitKey reads such an old key as
// another tenant and rest, or refuses it.
//
// Records about no tenant (a gateway's heartbeats, the session service's
// ticks, written to explicit partitions) have keys starting with NUL,
// which no tenant does: MQTT strings, and so client ids, cannot hold it.

const (
	keySep     = '/'
	keyEscape  = '%'
	escapedSep = "%2F"
	escapedEsc = "%25"
)

// AppendKey appends the record key of tenant's rest (a topic name or a
// client id) to dst and returns the extended slice: tenant + "/" + rest,
// with '%' and '/' within the tenant written as "%25" and "%2F" (see
// "Record keys" above). It allocates only when dst lacks the room.
func AppendKey(dst []byte, tenant, rest string) []byte {
	if !strings.ContainsAny(tenant, "/%") {
		dst = append(dst, tenant...)
	} else {
		for i := 0; i < len(tenant); i++ {
			switch c := tenant[i]; c {
			case keySep:
				dst = append(dst, escapedSep...)
			case keyEscape:
				dst = append(dst, escapedEsc...)
			default:
				dst = append(dst, c)
			}
		}
	}
	dst = append(dst, keySep)
	return append(dst, rest...)
}

// Key returns the record key of tenant's rest (AppendKey) in a new slice of
// exactly its length: one allocation.
func Key(tenant, rest string) []byte {
	return AppendKey(make([]byte, 0, keyLen(tenant, rest)), tenant, rest)
}

// keyLen returns the length of the record key of tenant's rest.
func keyLen(tenant, rest string) int {
	n := len(tenant) + 1 + len(rest)
	n += 2 * (strings.Count(tenant, "/") + strings.Count(tenant, "%"))
	return n
}

// ErrKey is wrapped by the errors of SplitKey.
var ErrKey = errors.New("not a tenant record key")

// SplitKey splits a record key written by AppendKey into its tenant and its
// rest. rest always aliases key; tenant aliases key too unless the tenant
// held an escape, when it is a new slice. A key without '/', or whose
// tenant holds a '%' other than "%25" or "%2F", is refused with an error
// wrapping ErrKey: each key has one reading, and each tenant and rest one
// key.
func SplitKey(key []byte) (tenant, rest []byte, err error) {
	i := bytes.IndexByte(key, keySep)
	if i < 0 {
		return nil, nil, fmt.Errorf("%w: %q has no '/'", ErrKey, key)
	}
	tenant, rest = key[:i], key[i+1:]
	if bytes.IndexByte(tenant, keyEscape) < 0 {
		return tenant, rest, nil
	}
	out := make([]byte, 0, len(tenant))
	for j := 0; j < len(tenant); j++ {
		c := tenant[j]
		if c != keyEscape {
			out = append(out, c)
			continue
		}
		switch esc := string(tenant[j:min(j+3, len(tenant))]); esc {
		case escapedSep:
			out = append(out, keySep)
		case escapedEsc:
			out = append(out, keyEscape)
		default:
			return nil, nil, fmt.Errorf("%w: %q: %q in the tenant is neither %s nor %s", ErrKey, key, esc, escapedEsc, escapedSep)
		}
		j += 2
	}
	return out, rest, nil
}
