package config

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"gopkg.in/yaml.v3"
)

// ByteSize is a number of bytes, written as a plain integer or with a
// unit: k, M, G, T (or kB, MB, GB, TB: powers of 1000) and Ki, Mi, Gi, Ti
// (or KiB, MiB, GiB, TiB: powers of 1024), upper or lower case, a space
// allowed before the unit: 10MB is 10,000,000 bytes, 10MiB 10,485,760.
type ByteSize int64

// UnmarshalYAML implements yaml.Unmarshaler.
func (b *ByteSize) UnmarshalYAML(n *yaml.Node) error {
	var s string
	if err := n.Decode(&s); err != nil {
		return fmt.Errorf("line %d: want a number of bytes: %w", n.Line, err)
	}
	v, err := ParseByteSize(s)
	if err != nil {
		return fmt.Errorf("line %d: %w", n.Line, err)
	}
	*b = v
	return nil
}

// ParseByteSize parses a ByteSize: 1048576, 512k, 10MB, 1 MiB, 1.5GiB.
func ParseByteSize(s string) (ByteSize, error) {
	t := strings.TrimSpace(s)
	i := strings.IndexFunc(t, func(r rune) bool { return (r < '0' || r > '9') && r != '.' && r != '-' && r != '+' })
	num, unit := t, ""
	if i >= 0 {
		num, unit = t[:i], strings.TrimSpace(t[i:])
	}
	mult, ok := byteUnits[strings.ToLower(unit)]
	switch {
	case num == "":
		return 0, fmt.Errorf("%q is not a number of bytes", s)
	case !ok:
		return 0, fmt.Errorf("%q: unknown unit %q (use B, kB, MB, GB, TB, KiB, MiB, GiB or TiB)", s, unit)
	}
	if n, err := strconv.ParseInt(num, 10, 64); err == nil {
		if n > math.MaxInt64/mult || n < math.MinInt64/mult {
			return 0, fmt.Errorf("%q: too large", s)
		}
		return ByteSize(n * mult), nil
	}
	f, err := strconv.ParseFloat(num, 64)
	if err != nil || math.IsNaN(f) || math.IsInf(f, 0) {
		return 0, fmt.Errorf("%q is not a number of bytes", s)
	}
	v := f * float64(mult)
	if v >= math.MaxInt64 || v <= math.MinInt64 {
		return 0, fmt.Errorf("%q: too large", s)
	}
	return ByteSize(math.Round(v)), nil
}

var byteUnits = map[string]int64{
	"": 1, "b": 1,
	"k": 1e3, "kb": 1e3, "m": 1e6, "mb": 1e6, "g": 1e9, "gb": 1e9, "t": 1e12, "tb": 1e12,
	"ki": 1 << 10, "kib": 1 << 10, "mi": 1 << 20, "mib": 1 << 20, "gi": 1 << 30, "gib": 1 << 30,
	"ti": 1 << 40, "tib": 1 << 40,
}

// sizeKeys are the keys of the file that hold a number of bytes; each
// takes a ByteSize. The roles type theirs as plain integers (a role does
// not parse units), so Load writes a value with a unit as its number of
// bytes before it decodes the file (sizesInBytes). TestEverySizeKeyTakesUnits
// finds a size key missing here.
var sizeKeys = []struct {
	path     string // dotted; "*" is any key of a section
	min, max int64  // what the key's Go type holds
}{
	{"gateway.max_packet_size", 0, math.MaxUint32},
	{"gateway.max_out_buffer", math.MinInt, math.MaxInt},
	{"cql.max_batch_bytes", math.MinInt, math.MaxInt},
	{"kafka.retention_bytes", math.MinInt64, math.MaxInt64},
	{"tenants.*.max_bytes_rate", math.MinInt64, math.MaxInt64},
}

// sizesInBytes returns doc with the string values of sizeKeys ("1 MiB",
// "64kB") written as their numbers of bytes, in place, so that every line
// stays where it was for the decoder's errors. A value that is not a size
// is refused here, naming its key and line. A value whose text cannot be
// found where the parser says it starts (a block scalar, an anchor) is
// left to the decoder, which refuses it as not a number.
func sizesInBytes(doc []byte) ([]byte, error) {
	var root yaml.Node
	if err := yaml.Unmarshal(doc, &root); err != nil {
		return doc, nil //nolint:nilerr // the decoder that follows reports what is wrong, with its line
	}
	type edit struct {
		at, n int
		bytes string
	}
	var (
		edits []edit
		errs  []string
	)
	lines := lineStarts(doc)
	for _, k := range sizeKeys {
		for _, v := range findKey(&root, strings.Split(k.path, "."), "") {
			n := v.node
			if n.Kind != yaml.ScalarNode || n.ShortTag() != "!!str" {
				continue // a number, or not a scalar: the decoder's business
			}
			size, err := ParseByteSize(n.Value)
			if err != nil {
				errs = append(errs, fmt.Sprintf("%s (line %d): %v", v.path, n.Line, err))
				continue
			}
			switch {
			case int64(size) > k.max:
				errs = append(errs, fmt.Sprintf("%s (line %d): %q is %d bytes, more than %d", v.path, n.Line, n.Value, size, k.max))
				continue
			case int64(size) < k.min:
				errs = append(errs, fmt.Sprintf("%s (line %d): %q is %d bytes, less than %d", v.path, n.Line, n.Value, size, k.min))
				continue
			}
			var src string
			switch n.Style {
			case 0:
				src = n.Value
			case yaml.SingleQuotedStyle:
				src = "'" + n.Value + "'"
			case yaml.DoubleQuotedStyle:
				src = `"` + n.Value + `"`
			default:
				continue
			}
			at, ok := offsetOf(doc, lines, n.Line, n.Column)
			if !ok || !bytes.HasPrefix(doc[at:], []byte(src)) {
				continue
			}
			edits = append(edits, edit{at, len(src), strconv.FormatInt(int64(size), 10)})
		}
	}
	if len(errs) > 0 {
		return nil, errors.New(strings.Join(errs, "; "))
	}
	if len(edits) == 0 {
		return doc, nil
	}
	// From the end, so that each edit's offset is still the file's.
	slices.SortFunc(edits, func(a, b edit) int { return b.at - a.at })
	out := slices.Clone(doc)
	for _, e := range edits {
		out = slices.Replace(out, e.at, e.at+e.n, []byte(e.bytes)...)
	}
	return out, nil
}

// keyValue is the value of a key found by findKey, with the key's dotted
// path as the file spells it.
type keyValue struct {
	path string
	node *yaml.Node
}

// findKey returns the values under n at path, whose "*" matches every key
// of a section.
func findKey(n *yaml.Node, path []string, prefix string) []keyValue {
	if n.Kind == yaml.DocumentNode {
		var out []keyValue
		for _, c := range n.Content {
			out = append(out, findKey(c, path, prefix)...)
		}
		return out
	}
	if n.Kind != yaml.MappingNode || len(path) == 0 {
		return nil
	}
	var out []keyValue
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		if path[0] != "*" && k.Value != path[0] {
			continue
		}
		p := k.Value
		if prefix != "" {
			p = prefix + "." + k.Value
		}
		if len(path) == 1 {
			out = append(out, keyValue{p, v})
			continue
		}
		out = append(out, findKey(v, path[1:], p)...)
	}
	return out
}

// lineStarts returns the offset of each line of doc (lines[0] is line 1).
func lineStarts(doc []byte) []int {
	starts := []int{0}
	for i, b := range doc {
		if b == '\n' {
			starts = append(starts, i+1)
		}
	}
	return starts
}

// offsetOf returns the offset in doc of line and column as yaml.v3 counts
// them: from 1, the column in characters.
func offsetOf(doc []byte, lines []int, line, column int) (int, bool) {
	if line < 1 || line > len(lines) || column < 1 {
		return 0, false
	}
	at := lines[line-1]
	for range column - 1 {
		if at >= len(doc) || doc[at] == '\n' {
			return 0, false
		}
		_, w := utf8.DecodeRune(doc[at:])
		at += w
	}
	return at, true
}
