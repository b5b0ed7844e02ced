package cqlschema

import (
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"slices"
	"strconv"
	"strings"
)

//go:embed *.cql
var files embed.FS

// KeyspacePlaceholder stands for the keyspace in the statements.
const KeyspacePlaceholder = "${keyspace}"

// BootstrapFile is the file of the bootstrap statements.
const BootstrapFile = "bootstrap.cql"

// Migration is one numbered migration file.
type Migration struct {
	// Version is the file's number: 1 for 0001_….cql.
	Version int
	// Name is the file name without .cql, e.g. "0001_router_shard".
	Name string
	// Statements are the file's statements, without comments and the
	// final ';', with the keyspace placeholder.
	Statements []string
	// Checksum is the hex SHA-256 of the statements: it changes when a
	// statement does, not when a comment does.
	Checksum string
}

// Bootstrap returns the statements of bootstrap.cql.
func Bootstrap() ([]string, error) {
	b, err := files.ReadFile(BootstrapFile)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", BootstrapFile, err)
	}
	stmts, err := Split(string(b))
	if err != nil {
		return nil, fmt.Errorf("parse %s: %w", BootstrapFile, err)
	}
	return stmts, nil
}

// Migrations returns the numbered migrations in version order. Versions
// start at 1 and have no gaps.
func Migrations() ([]Migration, error) {
	return parseMigrations(files)
}

// parseMigrations reads every NNNN_name.cql of fsys.
func parseMigrations(fsys fs.FS) ([]Migration, error) {
	names, err := fs.Glob(fsys, "*.cql")
	if err != nil {
		return nil, fmt.Errorf("list migrations: %w", err)
	}
	var ms []Migration
	for _, file := range names {
		if file == BootstrapFile {
			continue
		}
		v, err := versionOf(file)
		if err != nil {
			return nil, err
		}
		b, err := fs.ReadFile(fsys, file)
		if err != nil {
			return nil, fmt.Errorf("read %s: %w", file, err)
		}
		stmts, err := Split(string(b))
		if err != nil {
			return nil, fmt.Errorf("parse %s: %w", file, err)
		}
		if len(stmts) == 0 {
			return nil, fmt.Errorf("migration %s has no statement", file)
		}
		ms = append(ms, Migration{
			Version:    v,
			Name:       strings.TrimSuffix(file, ".cql"),
			Statements: stmts,
			Checksum:   Checksum(stmts),
		})
	}
	slices.SortFunc(ms, func(a, b Migration) int { return a.Version - b.Version })
	for i, m := range ms {
		if m.Version != i+1 {
			return nil, fmt.Errorf("migration %s: version %d, want %d (versions start at 1, without gaps or duplicates)", m.Name, m.Version, i+1)
		}
	}
	return ms, nil
}

// versionOf returns the version of a migration file named NNNN_name.cql.
func versionOf(file string) (int, error) {
	base := strings.TrimSuffix(path.Base(file), ".cql")
	num, name, ok := strings.Cut(base, "_")
	if !ok || len(num) != 4 || name == "" {
		return 0, fmt.Errorf("migration file %q: want NNNN_name.cql", file)
	}
	v, err := strconv.Atoi(num)
	if err != nil || v < 1 {
		return 0, fmt.Errorf("migration file %q: want NNNN_name.cql with NNNN ≥ 0001", file)
	}
	return v, nil
}

// Checksum returns the hex SHA-256 of statements as [Split] returns them,
// also ignoring white space next to punctuation, so that it changes with
// what a statement does, not with its layout.
func Checksum(statements []string) string {
	h := sha256.New()
	for _, s := range statements {
		h.Write([]byte(canonical(s)))
		h.Write([]byte{';', '\n'})
	}
	return hex.EncodeToString(h.Sum(nil))
}

// canonical drops the spaces of a collapsed statement that touch
// punctuation outside quotes: "a ( x , y )" becomes "a(x,y)".
func canonical(s string) string {
	const punct = "(),;=<>{}[]:"
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch c {
		case '\'', '"':
			n, err := quoted(s[i:], c)
			if err != nil {
				n = len(s) - i
			}
			b.WriteString(s[i : i+n])
			i += n - 1
		case ' ':
			prev := byte(0)
			if b.Len() > 0 {
				prev = b.String()[b.Len()-1]
			}
			next := byte(0)
			if i+1 < len(s) {
				next = s[i+1]
			}
			if !strings.ContainsRune(punct, rune(prev)) && !strings.ContainsRune(punct, rune(next)) {
				b.WriteByte(c)
			}
		default:
			b.WriteByte(c)
		}
	}
	return b.String()
}

// Render returns stmt for keyspace, which must be a valid CQL identifier
// (the store validates cql.keyspace).
func Render(stmt, keyspace string) string {
	return strings.ReplaceAll(stmt, KeyspacePlaceholder, keyspace)
}

// Split splits CQL source into statements: it drops comments, splits at
// each ';' outside quotes, trims white space and drops empty statements.
// Text after the last ';' that is not white space or comments is an error,
// as is an unterminated string or comment.
func Split(src string) ([]string, error) {
	var (
		stmts []string
		cur   strings.Builder
	)
	flush := func() {
		if s := collapse(cur.String()); s != "" {
			stmts = append(stmts, s)
		}
		cur.Reset()
	}
	for i := 0; i < len(src); {
		c := src[i]
		switch {
		case c == ';':
			flush()
			i++
		case strings.HasPrefix(src[i:], "--"), strings.HasPrefix(src[i:], "//"):
			end := strings.IndexByte(src[i:], '\n')
			if end < 0 {
				end = len(src) - i
			}
			cur.WriteByte(' ')
			i += end
		case strings.HasPrefix(src[i:], "/*"):
			end := strings.Index(src[i+2:], "*/")
			if end < 0 {
				return nil, fmt.Errorf("offset %d: unterminated /* comment", i)
			}
			cur.WriteByte(' ')
			i += 2 + end + 2
		case strings.HasPrefix(src[i:], "$$"):
			end := strings.Index(src[i+2:], "$$")
			if end < 0 {
				return nil, fmt.Errorf("offset %d: unterminated $$ string", i)
			}
			cur.WriteString(src[i : i+2+end+2])
			i += 2 + end + 2
		case c == '\'' || c == '"':
			n, err := quoted(src[i:], c)
			if err != nil {
				return nil, fmt.Errorf("offset %d: %w", i, err)
			}
			cur.WriteString(src[i : i+n])
			i += n
		default:
			cur.WriteByte(c)
			i++
		}
	}
	if rest := collapse(cur.String()); rest != "" {
		return nil, fmt.Errorf("statement without a final ';': %q", rest)
	}
	return stmts, nil
}

// quoted returns the length of the string quoted with q at the start of s;
// a doubled quote inside stands for one.
func quoted(s string, q byte) (int, error) {
	for i := 1; i < len(s); i++ {
		if s[i] != q {
			continue
		}
		if i+1 < len(s) && s[i+1] == q {
			i++
			continue
		}
		return i + 1, nil
	}
	return 0, errors.New("unterminated " + string(q) + " string")
}

// collapse trims s and replaces each run of white space outside quotes
// with one space, so a statement's checksum does not depend on its layout.
func collapse(s string) string {
	var b strings.Builder
	space := false
	for i := 0; i < len(s); {
		c := s[i]
		switch {
		case c == ' ' || c == '\t' || c == '\n' || c == '\r':
			space = true
			i++
			continue
		case c == '\'' || c == '"':
			n, err := quoted(s[i:], c)
			if err != nil { // Split checked the quotes already
				n = len(s) - i
			}
			if space && b.Len() > 0 {
				b.WriteByte(' ')
			}
			space = false
			b.WriteString(s[i : i+n])
			i += n
			continue
		case strings.HasPrefix(s[i:], "$$"):
			end := strings.Index(s[i+2:], "$$")
			n := len(s) - i
			if end >= 0 {
				n = 2 + end + 2
			}
			if space && b.Len() > 0 {
				b.WriteByte(' ')
			}
			space = false
			b.WriteString(s[i : i+n])
			i += n
			continue
		}
		if space && b.Len() > 0 {
			b.WriteByte(' ')
		}
		space = false
		b.WriteByte(c)
		i++
	}
	return b.String()
}
