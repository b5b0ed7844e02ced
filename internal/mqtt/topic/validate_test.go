package topic

import (
	"errors"
	"strings"
	"testing"
)

func TestValidateName(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want error
	}{
		{"simple", "sport/tennis/player1", nil},
		{"single char", "a", nil},
		{"single slash", "/", nil},
		{"leading slash", "/finance", nil},
		{"trailing slash", "sport/", nil},
		{"empty levels", "a//b", nil},
		{"space", "sport/tennis player", nil},
		{"dollar", "$SYS/broker/uptime", nil},
		{"unicode", "capteur/température/°C", nil},
		{"max length", strings.Repeat("a", MaxLen), nil},
		{"empty", "", ErrNameEmpty},
		{"too long", strings.Repeat("a", MaxLen+1), ErrNameTooLong},
		{"plus level", "sport/+", ErrNameWildcard},
		{"plus in level", "sport+", ErrNameWildcard},
		{"hash", "sport/#", ErrNameWildcard},
		{"hash only", "#", ErrNameWildcard},
		{"null", "sport\x00tennis", ErrNameNull},
		{"null only", "\x00", ErrNameNull},
		{"bad utf8", "sport/\xff", ErrNameUTF8},
		{"surrogate", "a/\xed\xa0\x80", ErrNameUTF8},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := ValidateName(tt.in)
			if !errors.Is(err, tt.want) {
				t.Fatalf("ValidateName(%.40q) = %v, want %v", tt.in, err, tt.want)
			}
			if err == nil {
				return
			}
			if !errors.Is(err, ErrInvalidName) || errors.Is(err, ErrInvalidFilter) {
				t.Errorf("error %v: want class ErrInvalidName only", err)
			}
			var te *Error
			if !errors.As(err, &te) || te.ReasonCode() != 0x90 {
				t.Errorf("error %v: want *Error with reason code 0x90", err)
			}
		})
	}
}

// filterTests are the topic filter cases shared by TestValidateFilter and
// the fuzz seed corpus.
var filterTests = []struct {
	name string
	in   string
	want error
}{
	{"spec multi-level", "sport/tennis/player1/#", nil},
	{"spec hash alone", "#", nil},
	{"spec hash after slash", "sport/#", nil},
	{"spec plus last", "sport/tennis/+", nil},
	{"spec plus alone", "+", nil},
	{"spec plus then hash", "+/tennis/#", nil},
	{"spec plus middle", "sport/+/player1", nil},
	{"spec plus plus", "+/+", nil},
	{"spec slash plus", "/+", nil},
	{"plus slash", "+/", nil},
	{"plus plus plus", "+/+/+", nil},
	{"slash hash", "/#", nil},
	{"empty levels", "a//b", nil},
	{"single slash", "/", nil},
	{"dollar", "$SYS/#", nil},
	{"share prefix is plain text", "$share/g/x", nil},
	{"unicode", "capteur/+/°C", nil},
	{"max length", strings.Repeat("a", MaxLen), nil},
	{"max length wildcards", strings.Repeat("+/", MaxLen/2) + "#", nil},
	{"empty", "", ErrFilterEmpty},
	{"too long", strings.Repeat("+/", MaxLen/2+1) + "#", ErrFilterTooLong},
	{"spec sport+", "sport+", ErrFilterSingleLevel},
	{"plus prefix", "+sport", ErrFilterSingleLevel},
	{"plus inside", "a/b+c/d", ErrFilterSingleLevel},
	{"plus plus same level", "++", ErrFilterSingleLevel},
	{"spec tennis#", "sport/tennis#", ErrFilterMultiLevel},
	{"spec hash not last", "sport/tennis/#/ranking", ErrFilterMultiLevel},
	{"hash then level", "#/x", ErrFilterMultiLevel},
	{"hash slash", "#/", ErrFilterMultiLevel},
	{"hash hash", "##", ErrFilterMultiLevel},
	{"hash prefix", "#a", ErrFilterMultiLevel},
	{"plus hash same level", "+#", ErrFilterSingleLevel},
	{"null", "a/\x00/b", ErrFilterNull},
	{"null only", "\x00", ErrFilterNull},
	{"bad utf8", "a/+/\xc3", ErrFilterUTF8},
	{"surrogate", "\xed\xbf\xbf/#", ErrFilterUTF8},
}

func TestValidateFilter(t *testing.T) {
	for _, tt := range filterTests {
		t.Run(tt.name, func(t *testing.T) {
			err := ValidateFilter(tt.in)
			if !errors.Is(err, tt.want) {
				t.Fatalf("ValidateFilter(%.40q) = %v, want %v", tt.in, err, tt.want)
			}
			if err == nil {
				return
			}
			if !errors.Is(err, ErrInvalidFilter) || errors.Is(err, ErrInvalidName) {
				t.Errorf("error %v: want class ErrInvalidFilter only", err)
			}
			var te *Error
			if !errors.As(err, &te) || te.ReasonCode() != 0x8F {
				t.Errorf("error %v: want *Error with reason code 0x8F", err)
			}
		})
	}
}

// sharedTests are the ParseShared cases shared by TestParseShared and the
// fuzz seed corpus.
var sharedTests = []struct {
	name   string
	in     string
	group  string
	inner  string
	shared bool
	want   error
}{
	{"plain", "sport/+", "", "sport/+", false, nil},
	{"plain invalid", "sport+", "", "", false, ErrFilterSingleLevel},
	{"plain empty", "", "", "", false, ErrFilterEmpty},
	{"share without slash", "$share", "", "$share", false, nil},
	{"shared is not share", "$shared/g/x", "", "$shared/g/x", false, nil},
	{"case matters", "$SHARE/g/x", "", "$SHARE/g/x", false, nil},
	{"simple", "$share/g/sport/tennis", "g", "sport/tennis", true, nil},
	{"wildcards", "$share/consumer1/sport/tennis/+", "consumer1", "sport/tennis/+", true, nil},
	{"hash", "$share/g/#", "g", "#", true, nil},
	{"leading slash filter", "$share/g//finance", "g", "/finance", true, nil},
	{"single slash filter", "$share/g//", "g", "/", true, nil},
	{"dollar filter", "$share/g/$SYS/#", "g", "$SYS/#", true, nil},
	{"unicode group", "$share/grüppe/a", "grüppe", "a", true, nil},
	{"no filter", "$share/grp", "", "", true, ErrShareNoFilter},
	{"empty filter", "$share/grp/", "", "", true, ErrShareNoFilter},
	{"empty group", "$share//x", "", "", true, ErrShareGroup},
	{"nothing", "$share/", "", "", true, ErrShareGroup},
	{"group plus", "$share/+/x", "", "", true, ErrShareGroup},
	{"group hash", "$share/g#/x", "", "", true, ErrShareGroup},
	{"group null", "$share/g\x00/x", "", "", true, ErrFilterNull},
	{"group bad utf8", "$share/\xff/x", "", "", true, ErrFilterUTF8},
	{"inner invalid", "$share/g/sport/tennis#", "", "", true, ErrFilterMultiLevel},
	{"inner hash not last", "$share/g/#/x", "", "", true, ErrFilterMultiLevel},
	{"inner null", "$share/g/a\x00", "", "", true, ErrFilterNull},
	{"too long", SharePrefix + "g/" + strings.Repeat("a", MaxLen), "", "", true, ErrFilterTooLong},
}

func TestParseShared(t *testing.T) {
	for _, tt := range sharedTests {
		t.Run(tt.name, func(t *testing.T) {
			group, inner, shared, err := ParseShared(tt.in)
			if !errors.Is(err, tt.want) || (err == nil) != (tt.want == nil) {
				t.Fatalf("ParseShared(%.40q) error = %v, want %v", tt.in, err, tt.want)
			}
			if group != tt.group || inner != tt.inner || shared != tt.shared {
				t.Errorf("ParseShared(%.40q) = %q, %q, %v; want %q, %q, %v",
					tt.in, group, inner, shared, tt.group, tt.inner, tt.shared)
			}
			if err != nil {
				var te *Error
				if !errors.Is(err, ErrInvalidFilter) || !errors.As(err, &te) || te.ReasonCode() != ReasonFilterInvalid {
					t.Errorf("error %v: want a topic filter *Error", err)
				}
			}
		})
	}
}

// matchTests are the Match cases, most from MQTT 3.1.1 and 5.0 §4.7; they
// also seed FuzzMatch.
var matchTests = []struct {
	filter, name string
	want         bool
}{
	// §4.7.1.2 multi-level wildcard.
	{"sport/tennis/player1/#", "sport/tennis/player1", true},
	{"sport/tennis/player1/#", "sport/tennis/player1/ranking", true},
	{"sport/tennis/player1/#", "sport/tennis/player1/score/wimbledon", true},
	{"sport/tennis/player1/#", "sport/tennis/player2", false},
	{"sport/tennis/player1/#", "sport/tennis", false},
	{"sport/#", "sport", true},
	{"sport/#", "sport/", true},
	{"sport/#", "sports", false},
	{"#", "sport", true},
	{"#", "/", true},
	{"#", "sport/tennis/player1", true},
	{"/#", "/finance", true},
	{"/#", "finance", false},
	// §4.7.1.3 single-level wildcard.
	{"sport/tennis/+", "sport/tennis/player1", true},
	{"sport/tennis/+", "sport/tennis/player2", true},
	{"sport/tennis/+", "sport/tennis/player1/ranking", false},
	{"sport/+", "sport", false},
	{"sport/+", "sport/", true},
	{"+", "sport", true},
	{"+", "/finance", false},
	{"+/+", "/finance", true},
	{"/+", "/finance", true},
	{"+/tennis/#", "sport/tennis", true},
	{"+/tennis/#", "sport/tennis/player1", true},
	{"+/tennis/#", "sport/golf", false},
	{"sport/+/player1", "sport/tennis/player1", true},
	{"sport/+/player1", "sport//player1", true},
	{"sport/+/player1", "sport/tennis/player2", false},
	{"+/#", "a", true},
	{"+/+/#", "a", false},
	{"+/+/#", "a/b", true},
	{"+", "", true},
	// §4.7.2 topics beginning with $.
	{"#", "$SYS/broker/uptime", false},
	{"#", "$SYS", false},
	{"+/monitor/Clients", "$SYS/monitor/Clients", false},
	{"$SYS/#", "$SYS/monitor/Clients", true},
	{"$SYS/#", "$SYS", true},
	{"$SYS/monitor/+", "$SYS/monitor/Clients", true},
	{"$SYS/+", "$SYS/", true},
	{"+", "$SYS", false},
	{"a/#", "a/$b", true},
	{"a/+", "a/$b", true},
	// Literal levels.
	{"sport/tennis", "sport/tennis", true},
	{"sport/tennis", "sport/Tennis", false},
	{"sport/tennis", "sport/tennis/", false},
	{"sport/tennis/", "sport/tennis", false},
	{"a//b", "a//b", true},
	{"a//b", "a/b", false},
	{"/", "/", true},
	{"/", "", false},
	{"$share/g/x", "$share/g/x", true},
}

func TestMatch(t *testing.T) {
	for _, tt := range matchTests {
		if got := Match(tt.filter, tt.name); got != tt.want {
			t.Errorf("Match(%q, %q) = %v, want %v", tt.filter, tt.name, got, tt.want)
		}
	}
}

func TestValidateAllocs(t *testing.T) {
	name := "tenant7/site/s42/device/d1234/telemetry"
	filter := "tenant7/site/+/device/d1234/#"
	shared := "$share/g/" + filter
	for fn, f := range map[string]func(){
		"ValidateName":   func() { _ = ValidateName(name) },
		"ValidateFilter": func() { _ = ValidateFilter(filter) },
		"ParseShared":    func() { _, _, _, _ = ParseShared(shared) },
		"Match":          func() { _ = Match(filter, name) },
	} {
		if n := testing.AllocsPerRun(100, f); n != 0 {
			t.Errorf("%s: %v allocs per run, want 0", fn, n)
		}
	}
}
