package topic

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

// MaxLen is the longest topic name or filter in bytes: both are MQTT UTF-8
// strings with a two-byte length prefix.
const MaxLen = 65535

// SharePrefix starts a shared subscription filter, $share/{ShareName}/{filter}.
const SharePrefix = "$share/"

// ValidateName checks a topic name taken from a PUBLISH (or a Will) per MQTT
// 3.1.1 and 5.0 §4.7: at least one byte, at most [MaxLen] bytes, no wildcard
// characters, no U+0000 and well-formed UTF-8. Every error it returns is a
// topic name error (errors.Is(err, [ErrInvalidName]), reason code 0x90).
// It does not allocate.
func ValidateName(name string) error {
	if len(name) == 0 {
		return ErrNameEmpty
	}
	if len(name) > MaxLen {
		return ErrNameTooLong
	}
	for i := 0; i < len(name); i++ {
		switch name[i] {
		case '+', '#':
			return ErrNameWildcard
		case 0:
			return ErrNameNull
		}
	}
	if !utf8.ValidString(name) {
		return ErrNameUTF8
	}
	return nil
}

// ValidateFilter checks a topic filter taken from a SUBSCRIBE or UNSUBSCRIBE
// per MQTT 3.1.1 and 5.0 §4.7: at least one byte, at most [MaxLen] bytes, '+'
// only as a whole level, '#' only as the whole last level, no U+0000 and
// well-formed UTF-8. It treats $share/ like any other text; use
// [ParseShared] for filters that may be shared. Every error it returns is a
// topic filter error (errors.Is(err, [ErrInvalidFilter]), reason code 0x8F).
// It does not allocate.
func ValidateFilter(filter string) error {
	if len(filter) == 0 {
		return ErrFilterEmpty
	}
	if len(filter) > MaxLen {
		return ErrFilterTooLong
	}
	last := len(filter) - 1
	for i := 0; i < len(filter); i++ {
		switch filter[i] {
		case '+':
			if (i > 0 && filter[i-1] != '/') || (i < last && filter[i+1] != '/') {
				return ErrFilterSingleLevel
			}
		case '#':
			if i != last || (i > 0 && filter[i-1] != '/') {
				return ErrFilterMultiLevel
			}
		case 0:
			return ErrFilterNull
		}
	}
	if !utf8.ValidString(filter) {
		return ErrFilterUTF8
	}
	return nil
}

// ParseShared splits and validates a subscription filter in one step.
//
// For $share/{group}/{inner} (MQTT 5.0 §4.8.2) it returns the group and the
// inner filter with shared set. The group must be non-empty and free of '+'
// and '#' (it ends at the first '/'); the inner filter must be non-empty and
// pass [ValidateFilter]. "$share/grp" and "$share/grp/" (no filter) and
// "$share//x" (empty group) are errors.
//
// Any filter that does not start with "$share/" is returned unchanged as
// inner with shared false and err from [ValidateFilter]; "$share" alone or
// "$shared/x" are ordinary filters.
//
// shared reports whether the filter starts with "$share/" even when err is
// not nil, so a broker without shared subscriptions can answer 0x9E instead.
// On error group and inner are empty. Every error is a topic filter error
// (errors.Is(err, [ErrInvalidFilter]), reason code 0x8F). The returned
// strings are substrings of filter. It does not allocate unless the inner
// filter is invalid.
func ParseShared(filter string) (group, inner string, shared bool, err error) {
	if !strings.HasPrefix(filter, SharePrefix) {
		if err := ValidateFilter(filter); err != nil {
			return "", "", false, err
		}
		return "", filter, false, nil
	}
	if len(filter) > MaxLen {
		return "", "", true, ErrFilterTooLong
	}
	rest := filter[len(SharePrefix):]
	slash := strings.IndexByte(rest, '/')
	if slash < 0 {
		if rest == "" {
			return "", "", true, ErrShareGroup
		}
		return "", "", true, ErrShareNoFilter
	}
	group, inner = rest[:slash], rest[slash+1:]
	if group == "" {
		return "", "", true, ErrShareGroup
	}
	for i := 0; i < len(group); i++ {
		switch group[i] {
		case '+', '#':
			return "", "", true, ErrShareGroup
		case 0:
			return "", "", true, ErrFilterNull
		}
	}
	if !utf8.ValidString(group) {
		return "", "", true, ErrFilterUTF8
	}
	if inner == "" {
		return "", "", true, ErrShareNoFilter
	}
	if err := ValidateFilter(inner); err != nil {
		return "", "", true, fmt.Errorf("shared subscription %q: %w", group, err)
	}
	return group, inner, true, nil
}
