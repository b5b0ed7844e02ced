package config

import (
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"
)

// fileErrors rewrites the errors yaml.v3 gives for values of the wrong
// type and for unknown keys, which name a line and a Go type ("line 2:
// cannot unmarshal !!str `fast` into time.Duration"), so that each names
// the key as the file spells it and what it wants:
//
//	gateway.express_linger (line 2): "fast" is not a duration (give a unit: 500ms, 5s, 1m)
//
// doc is the file's bytes. Errors of another kind (a file that is not
// YAML) come back as they are.
func fileErrors(doc []byte, err error) error {
	var te *yaml.TypeError
	if !errors.As(err, &te) {
		return err
	}
	var root yaml.Node
	if yaml.Unmarshal(doc, &root) != nil {
		return err
	}
	keys := map[int]string{} // line → the dotted path of the key on it
	keyLines(&root, "", keys)
	msgs := make([]string, 0, len(te.Errors))
	for _, m := range te.Errors {
		msgs = append(msgs, fileError(m, keys))
	}
	return errors.New(strings.Join(msgs, "; "))
}

var (
	typeErrorRE    = regexp.MustCompile("^line ([0-9]+): cannot unmarshal !!([a-z]+)(?: `(.*)`)? into (.+)$")
	unknownFieldRE = regexp.MustCompile(`^line ([0-9]+): field (.+) not found in type .+$`)
)

// fileError rewrites one message of a yaml.TypeError (see fileErrors).
func fileError(msg string, keys map[int]string) string {
	if m := typeErrorRE.FindStringSubmatch(msg); m != nil {
		line, _ := strconv.Atoi(m[1])
		tag, value, goType := m[2], m[3], m[4]
		want := wants(goType)
		if want == "" {
			want = "a value of type " + goType
		}
		what := strconv.Quote(value)
		if tag == "map" || tag == "seq" {
			what = map[string]string{"map": "a section", "seq": "a list"}[tag]
		}
		s := fmt.Sprintf("%s is not %s", what, want)
		if goType == "time.Duration" && tag == "int" {
			s += " (a number needs a unit: " + value + "s is " + value + " seconds)"
		} else if goType == "time.Duration" {
			s += " (give a unit: 500ms, 5s, 1m)"
		}
		return where(line, keys) + ": " + s
	}
	if m := unknownFieldRE.FindStringSubmatch(msg); m != nil {
		line, _ := strconv.Atoi(m[1])
		return where(line, keys) + ": unknown key (README.md, \"Configuration\", lists the keys)"
	}
	return msg
}

// where names the key on line, with the line.
func where(line int, keys map[int]string) string {
	if k, ok := keys[line]; ok {
		return fmt.Sprintf("%s (line %d)", k, line)
	}
	return fmt.Sprintf("line %d", line)
}

// wants says in words what a Go type of the configuration takes.
func wants(goType string) string {
	switch {
	case goType == "time.Duration":
		return "a duration"
	case goType == "bool":
		return "true or false"
	case strings.HasPrefix(goType, "int"), strings.HasPrefix(goType, "uint"):
		return "a whole number"
	case strings.HasPrefix(goType, "float"):
		return "a number"
	case goType == "string":
		return "a string"
	case strings.HasPrefix(goType, "[]"):
		return "a list"
	case strings.HasPrefix(goType, "map["):
		return "a section"
	}
	return ""
}

// keyLines records the dotted path of every mapping key under n by the
// line it is on (list items as path[i]).
func keyLines(n *yaml.Node, path string, keys map[int]string) {
	switch n.Kind {
	case yaml.DocumentNode:
		for _, c := range n.Content {
			keyLines(c, path, keys)
		}
	case yaml.MappingNode:
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i], n.Content[i+1]
			p := k.Value
			if path != "" {
				p = path + "." + k.Value
			}
			keys[k.Line] = p
			keyLines(v, p, keys)
		}
	case yaml.SequenceNode:
		for i, c := range n.Content {
			p := fmt.Sprintf("%s[%d]", path, i)
			if _, ok := keys[c.Line]; !ok {
				keys[c.Line] = p
			}
			keyLines(c, p, keys)
		}
	}
}
