// Package acl reads a Mosquitto 2.0 ACL file (the broker's acl_file) and
// answers, for one connected client, whether it may publish to a topic and
// whether it may receive a message on a topic. Users bring their Mosquitto
// file along and get the answers Mosquitto 2.0 gives (a test runs the real
// broker on the same files); where this package departs from Mosquitto it
// never grants more, and says so below.
//
// # The tenant
//
// The file is written in the client's own view of topic names: the broker
// puts every topic in the client's tenant by itself, so a rule "topic
// sensors/#" covers the tenant's sensors/# and never another tenant's. The
// gateway calls this package with the tenant-relative topic. User names in
// "user" lines are the full names clients send in CONNECT (acme-alice).
//
// # The file
//
// One directive a line, as Mosquitto's aclfile.example shows:
//
//	# anonymous clients (lines before any "user" line)
//	topic read $SYS/#
//
//	user acme-alice
//	topic readwrite sensors/#
//	topic deny sensors/secret
//
//	# every client
//	pattern write devices/%c/status
//	pattern read users/%u/#
//
// The directives:
//
//   - topic [read|write|readwrite|deny] <filter>: a rule for the current
//     section. Without an access word the rule grants readwrite. Before any
//     "user" line the section is the anonymous clients' (clients without a
//     user name); after "user <name>" it is that user's.
//   - user <name>: starts the section of the user with that name: everything
//     after "user " up to the end of the line, blanks around it dropped, so
//     a name may contain spaces. Names compare byte for byte. Two sections
//     of one name add up. A user without a section gets nothing from topic
//     lines, not the anonymous section.
//   - pattern [read|write|readwrite|deny] <filter>: a rule for every client,
//     in any place of the file, with "%c" replaced by the client identifier
//     and "%u" by the user name wherever they appear, as a whole level
//     (devices/%c/status) or inside one (devices/dev-%c/#), each occurrence,
//     left to right, as Mosquitto does ("%%c" is '%' then the client
//     identifier; a '%' before anything else is itself). A pattern with "%u"
//     never applies to an anonymous client. A pattern with neither is a rule
//     for every client (Mosquitto warns about it; it is accepted here).
//
// Fields are separated by spaces, as Mosquitto's parser splits them; the
// filter is the rest of the line after the access word, blanks around it
// dropped, so it may contain spaces. Lines are trimmed of blanks at both
// ends ("\r\n" line ends are accepted), and blank lines and lines starting
// with '#' are skipped. Keywords and access words are lower case.
//
// A file is accepted whole or refused whole: the first line that cannot be
// read stops the parse with a *LineError naming the 1-based line and the
// reason (acl line 7: unknown access "rwx"). Refused: an unknown keyword or
// access word; "user" without a name; "topic" or "pattern" without a
// filter; a filter that is not a valid MQTT topic filter (a/#/b, +x, empty,
// not UTF-8, a NUL, over 65535 bytes) or has more than 200 '/' (Mosquitto's
// limit); a user name that is not UTF-8; a NUL anywhere; a line longer than
// [MaxLineLen] bytes; a file longer than [MaxFileSize] bytes.
//
// Stricter than Mosquitto, which accepts these lines and reads them in a
// way their author hardly meant:
//
//   - a lone access word ("topic read", "topic deny") is refused: Mosquitto
//     takes the word for the filter and grants readwrite on the topic
//     named "read";
//   - a tab (or another blank that is not a space) inside the keyword, or
//     in the lone field after it, is refused: Mosquitto splits on spaces
//     only, so "topic read<TAB>a/b" would be readwrite on the topic
//     "read<TAB>a/b"; a tab between two fields is reported rather than
//     guessed at;
//   - indented comments and lines starting with a tab are accepted
//     (Mosquitto refuses both).
//
// # Deciding
//
// Allow follows mosquitto_acl_check_default (src/security_default.c) and
// acl__check_dollar (src/security.c) of Mosquitto 2.0, unchanged up to
// 2.0.20:
//
//  1. Topics starting with "$share" may be neither published nor received;
//     topics starting with "$SYS" may not be published. (Mosquitto lets a
//     bridge publish its $SYS/broker/connection/+/state; Shoal has no
//     bridges.)
//  2. The client's section: the user's topic lines, or the anonymous
//     section for a client without a user name. If a deny rule there
//     matches the topic, the answer is no; else if a rule granting the
//     access asked for matches, the answer is yes. Order in the file does
//     not matter: Mosquitto keeps deny rules at the front of each list.
//  3. Otherwise the pattern lines, the same way: a matching deny pattern
//     refuses, a matching pattern that grants the access allows.
//  4. Otherwise no. An empty file, or a client with neither a section nor
//     a pattern that matches, may do nothing.
//
// So a deny wins over a grant of its own kind, but a grant in the client's
// section is final: a "pattern deny" does not take back what the user's
// "topic" lines grant, in Mosquitto as here. To deny a topic to a user
// whatever the patterns say, put the deny in the user's section.
//
// A rule's filter matches a topic as an MQTT subscription does: levels split
// on '/', '+' one level (possibly empty), '#' as the last level any number
// of levels including none ("a/#" matches "a"), and a topic starting with
// '$' is not matched by a filter whose first level is '+' or '#': "topic
// read #" does not grant $SYS/broker/uptime, "topic read $SYS/#" does.
//
// # Wildcards and separators in client identifiers and user names
//
// A client identifier or user name could otherwise widen a pattern: with
// "pattern read devices/%c/#", the identifier "+" would read every device,
// "#" everything, and "alice/x" a subtree of the device alice. The rule:
// a client whose identifier, or whose user name, contains '+', '#' or '/'
// gets nothing from pattern lines; its answer is decided by its section
// alone (step 3 says no). Mosquitto 2.0 does exactly this for '+' and '#'
// (and logs "ACL denying access to client with dangerous client id"); '/'
// is added here, as the comment in Mosquitto's acl__check_single intends.
// A substituted value therefore always stays inside the level it stands in.
// The user name of an anonymous client is not looked at.
//
// # Subscriptions and deliveries
//
// Mosquitto 2.0's ACL file does not check subscriptions: its check returns
// success for every SUBSCRIBE ("FIXME - implement ACL subscription
// strings", security_default.c). Shoal does, as Mosquitto 2.1's dynamic
// security does (mosquitto_sub_matches_acl): AllowSubscribe grants a
// filter when a read rule covers it (matches every topic the filter
// matches) and no deny covers it, the client's section first, then the
// patterns; the gateway answers SUBACK 0x87 (3.1.1: 0x80) otherwise. A
// Mosquitto file that grants "topic read a/+/t" therefore refuses a
// subscription to a/# that Mosquitto 2.0 would grant and then filter.
// What also protects topics is the read check on every message sent to a
// client, as Mosquitto makes it (subs__send, retained messages, queued
// messages of a resumed session): with "topic read a/#" and "topic deny
// a/secret" a subscriber of a/# gets a/x but never a/secret. The gateway
// calls AllowRead before it sends each message, retained ones included.
//
// A will is checked with AllowPublish when it is sent, with the rules then
// in force, as Mosquitto checks it in context__send_will.
//
// # Reloading
//
// ACL holds the file in force. Reload reads it again (the process calls it
// on SIGHUP); Watch polls the file's size, modification time and, on Linux,
// device, inode and change time, and reloads when they change. A version
// that cannot be read or parsed leaves the previous file in force and is
// logged (slog, key "err", with the line number) once.
//
// A Client, made once per connection by For, sees the file in force: after
// a reload its next check finds the new file and looks up its section again
// (one small allocation, on that check only). Connections keep their
// subscriptions across a reload, as in Mosquitto; the messages they receive
// are checked against the new rules.
//
// # Cost
//
// Each section, and the patterns, are compiled into a trie of levels once
// per file, shared by every client: a check walks the topic's levels once
// per trie, compares a pattern's "%c" and "%u" with the client's values in
// place, and allocates nothing, allowed or denied. File, ACL and Client are
// safe for concurrent use.
package acl
