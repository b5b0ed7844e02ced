// Package topic implements MQTT topic names and topic filters for MQTT 3.1.1
// and 5.0 (§4.7 and §4.8): their validation, the parsing of shared
// subscriptions, single-filter matching, and the subscription trie that
// matches a published name against every filter at once. The gateway uses it
// to validate PUBLISH, SUBSCRIBE and UNSUBSCRIBE packets; the router uses the
// trie to find the subscribers of each message. It depends on the standard
// library only.
//
// # Names, filters and errors
//
// A topic name (PUBLISH) has no wildcards; a topic filter (SUBSCRIBE) may use
// '+' for exactly one level and '#', as the whole last level, for any number
// of levels including none. Both are non-empty UTF-8 strings of at most 65535
// bytes without U+0000. [ValidateName] and [ValidateFilter] check these rules
// without allocating.
//
// Every validation error is, or wraps, one of the Err* sentinels, all of
// type [*Error], so callers choose the MQTT 5.0 reason code with errors.Is or
// errors.As and [Error.ReasonCode]:
//
//   - errors.Is(err, [ErrInvalidName]): reason code 0x90, Topic Name invalid
//     ([ErrNameEmpty], [ErrNameTooLong], [ErrNameWildcard], [ErrNameNull],
//     [ErrNameUTF8]);
//   - errors.Is(err, [ErrInvalidFilter]): reason code 0x8F, Topic Filter
//     invalid ([ErrFilterEmpty], [ErrFilterTooLong], [ErrFilterNull],
//     [ErrFilterUTF8], [ErrFilterSingleLevel], [ErrFilterMultiLevel],
//     [ErrShareGroup], [ErrShareNoFilter]).
//
// MQTT 3.1.1 has no reason codes: a bad filter gets 0x80 (failure) in SUBACK
// and a bad PUBLISH topic closes the connection.
//
// # Shared subscriptions
//
// [ParseShared] splits "$share/{group}/{filter}" into its group and inner
// filter and validates both; any other filter comes back unchanged with
// shared false. The trie knows nothing of shared subscriptions: callers strip
// the "$share/{group}/" prefix, subscribe the inner filter and fold the group
// into the trie's key type, then pick one member per group from the matches.
//
// # Matching
//
// [Match] checks one filter against one name. [Trie] holds any number of
// (filter, key) entries, each with a value, and Trie.Match appends every
// entry whose filter matches a name. Both apply the '$' rule: names starting
// with '$' (such as "$SYS/...") are not matched by filters whose first level
// is '+' or '#'.
//
// # Concurrency and ownership
//
// The validators and [Match] are pure functions. A [Trie] is safe for
// concurrent use: Match, Lookup, Len and Walk take a read lock and run in
// parallel with each other; Subscribe and Unsubscribe take the write lock and
// run alone. Trie.Match does not allocate when dst has
// room for the result and never retains dst; the entries it appends are
// copies, but pointers inside K or V are shared with the trie. The trie keeps
// substrings of the filter strings passed to Subscribe (strings are
// immutable, so this is safe). Walk's callback runs under the read lock and
// must not call the same trie.
package topic
