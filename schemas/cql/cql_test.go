package cqlschema

import (
	"slices"
	"strings"
	"testing"
	"testing/fstest"
)

func TestSplit(t *testing.T) {
	for _, tc := range []struct {
		name, src string
		want      []string
	}{
		{"empty", "", nil},
		{"comments only", "-- a\n// b\n/* c\n d */\n", nil},
		{"two", "CREATE TABLE a (x int PRIMARY KEY);\nDROP TABLE b;", []string{"CREATE TABLE a (x int PRIMARY KEY)", "DROP TABLE b"}},
		{"layout collapsed", "CREATE  TABLE\n\ta (\n  x int  PRIMARY KEY\n) ;", []string{"CREATE TABLE a ( x int PRIMARY KEY )"}},
		{"semicolon in strings", "INSERT INTO t (a) VALUES ('x;y');SELECT \"we;ird\" FROM t;", []string{"INSERT INTO t (a) VALUES ('x;y')", `SELECT "we;ird" FROM t`}},
		{"doubled quotes", "INSERT INTO t (a) VALUES ('it''s; fine');", []string{"INSERT INTO t (a) VALUES ('it''s; fine')"}},
		{"comment markers in strings", "INSERT INTO t (a) VALUES ('-- no // comment /* here */');", []string{"INSERT INTO t (a) VALUES ('-- no // comment /* here */')"}},
		{"white space in strings kept", "INSERT INTO t (a) VALUES ('a  \n b');", []string{"INSERT INTO t (a) VALUES ('a  \n b')"}},
		{"dollar strings", "CREATE FUNCTION f() RETURNS NULL ON NULL INPUT RETURNS int LANGUAGE java AS $$ return 1; $$;", []string{"CREATE FUNCTION f() RETURNS NULL ON NULL INPUT RETURNS int LANGUAGE java AS $$ return 1; $$"}},
		{"comments inside", "CREATE TABLE a ( -- the key\n x int PRIMARY KEY /* only */ );", []string{"CREATE TABLE a ( x int PRIMARY KEY )"}},
		{"empty statements dropped", ";;SELECT 1 FROM t;;", []string{"SELECT 1 FROM t"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Split(tc.src)
			if err != nil {
				t.Fatalf("Split: %v", err)
			}
			if !slices.Equal(got, tc.want) {
				t.Fatalf("Split:\n got %q\nwant %q", got, tc.want)
			}
		})
	}
}

func TestSplitErrors(t *testing.T) {
	for _, src := range []string{
		"SELECT 1 FROM t",                // no final ';'
		"SELECT 1 FROM t; SELECT",        // trailing text
		"INSERT INTO t (a) VALUES ('x);", // unterminated string
		`SELECT "x FROM t;`,              // unterminated identifier
		"/* never closed",
		"SELECT $$ x;",
	} {
		if got, err := Split(src); err == nil {
			t.Errorf("Split(%q) = %q, want an error", src, got)
		}
	}
}

func TestChecksumIgnoresCommentsAndLayout(t *testing.T) {
	a, err := Split("-- v1\nCREATE TABLE a (x int PRIMARY KEY);")
	if err != nil {
		t.Fatal(err)
	}
	b, err := Split("/* edited comment */ CREATE TABLE a (\n    x int PRIMARY KEY\n);\n")
	if err != nil {
		t.Fatal(err)
	}
	c, err := Split("CREATE TABLE a (x bigint PRIMARY KEY);")
	if err != nil {
		t.Fatal(err)
	}
	if Checksum(a) != Checksum(b) {
		t.Errorf("checksum changed with comments and layout: %q vs %q", a, b)
	}
	if got := canonical("CREATE TABLE a ( x int, y text, PRIMARY KEY ((x), y) ) WITH c = { 'k' : 'v  w' }"); got != "CREATE TABLE a(x int,y text,PRIMARY KEY((x),y))WITH c={'k':'v  w'}" {
		t.Errorf("canonical: %q", got)
	}
	if Checksum(a) == Checksum(c) {
		t.Errorf("checksum unchanged by a different statement")
	}
}

// TestEmbedded checks the shipped files: they parse, versions run from 1
// without gaps, and every statement follows the package's rules.
func TestEmbedded(t *testing.T) {
	boot, err := Bootstrap()
	if err != nil {
		t.Fatal(err)
	}
	ms, err := Migrations()
	if err != nil {
		t.Fatal(err)
	}
	if len(boot) == 0 || len(ms) == 0 {
		t.Fatalf("%d bootstrap statements, %d migrations", len(boot), len(ms))
	}
	all := slices.Clone(boot)
	for _, m := range ms {
		all = append(all, m.Statements...)
	}
	for _, s := range all {
		upper := strings.ToUpper(s)
		if strings.HasPrefix(upper, "CREATE ") && !strings.Contains(upper, " IF NOT EXISTS ") {
			t.Errorf("not idempotent (CREATE without IF NOT EXISTS): %s", s)
		}
		if !strings.HasPrefix(upper, "CREATE ") && !strings.HasPrefix(upper, "ALTER ") {
			t.Errorf("a migration statement is neither CREATE nor ALTER: %s", s)
		}
		if strings.HasPrefix(upper, "ALTER ") && !strings.Contains(upper, " IF EXISTS ") {
			t.Errorf("not idempotent (ALTER without IF EXISTS): %s", s)
		}
		if !strings.Contains(s, KeyspacePlaceholder+".") {
			t.Errorf("table not qualified with %s: %s", KeyspacePlaceholder, s)
		}
		for _, word := range []string{"TABLETS", "STORAGEATTACHEDINDEX", " SAI", "VECTOR<", "SYNCHRONOUS_UPDATES", "CDC = {", "PAXOS_GRACE"} {
			if strings.Contains(upper, word) {
				t.Errorf("uses %s, which only one of Cassandra and ScyllaDB has: %s", word, s)
			}
		}
	}
	if got := Render("CREATE TABLE IF NOT EXISTS ${keyspace}.t (a int PRIMARY KEY)", "shoal_1"); got != "CREATE TABLE IF NOT EXISTS shoal_1.t (a int PRIMARY KEY)" {
		t.Errorf("Render: %q", got)
	}
}

func TestMigrationFiles(t *testing.T) {
	stmt := []byte("CREATE TABLE IF NOT EXISTS ${keyspace}.t (a int PRIMARY KEY);")
	good := fstest.MapFS{
		"bootstrap.cql":   {Data: stmt},
		"0002_second.cql": {Data: stmt},
		"0001_first.cql":  {Data: stmt},
	}
	ms, err := parseMigrations(good)
	if err != nil {
		t.Fatal(err)
	}
	if len(ms) != 2 || ms[0].Version != 1 || ms[0].Name != "0001_first" || ms[1].Version != 2 {
		t.Fatalf("migrations %+v", ms)
	}
	for name, fsys := range map[string]fstest.MapFS{
		"gap":          {"0001_a.cql": {Data: stmt}, "0003_c.cql": {Data: stmt}},
		"duplicate":    {"0001_a.cql": {Data: stmt}, "0001_b.cql": {Data: stmt}},
		"zero":         {"0000_a.cql": {Data: stmt}},
		"bad name":     {"1_a.cql": {Data: stmt}},
		"no name":      {"0001.cql": {Data: stmt}},
		"empty":        {"0001_a.cql": {Data: []byte("-- nothing\n")}},
		"bad syntax":   {"0001_a.cql": {Data: []byte("CREATE TABLE 'x;")}},
		"not starting": {"0002_b.cql": {Data: stmt}},
	} {
		if ms, err := parseMigrations(fsys); err == nil {
			t.Errorf("%s: parsed %+v, want an error", name, ms)
		}
	}
}
