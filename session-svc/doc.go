// Package sessionsvc (folder session-svc) is Shoal's session service: it
// owns client sessions (who is connected where, takeover, expiry), wills and
// their delays, and the offline inbox of persistent sessions, answering each
// CONNECT request that gateways send over the log.
//
// It meets the gateway and router services only through the log and declares
// the narrow view-store interface it needs in its own package.
package sessionsvc
