package topic

import "strings"

// Match reports whether the topic filter matches the topic name, per MQTT
// 3.1.1 and 5.0 §4.7:
//
//   - levels are separated by '/' and compared byte for byte; a leading or
//     trailing '/' makes an empty level ("/finance" has two levels);
//   - '+' matches exactly one level, which may be empty;
//   - '#' matches the level it stands at and every level after it, and also
//     the parent level: "sport/#" matches "sport";
//   - a name starting with '$' is not matched by a filter whose first level
//     is '+' or '#' [MQTT-4.7.2-1]: "#" does not match "$SYS/uptime", but
//     "$SYS/#" does.
//
// Both arguments are assumed valid (see [ValidateFilter], [ValidateName]);
// for invalid input the result is unspecified but Match does not panic.
// Match checks one filter against one name; use [Trie] to match a name
// against many filters. It does not allocate.
func Match(filter, name string) bool {
	if len(name) > 0 && name[0] == '$' && len(filter) > 0 && (filter[0] == '+' || filter[0] == '#') {
		return false
	}
	for {
		flevel, frest, fmore := strings.Cut(filter, "/")
		if flevel == "#" {
			return true
		}
		nlevel, nrest, nmore := strings.Cut(name, "/")
		if flevel != "+" && flevel != nlevel {
			return false
		}
		switch {
		case !fmore:
			return !nmore
		case !nmore:
			// The name ends here; only a trailing "/#" (parent rule) can
			// still match.
			return frest == "#"
		}
		filter, name = frest, nrest
	}
}
