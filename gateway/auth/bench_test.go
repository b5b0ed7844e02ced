package auth

import (
	"os"
	"path/filepath"
	"testing"
)

// BenchmarkAuthenticate is the cost of one CONNECT's password check, per
// kind of entry, with the fixtures made by the real tools: mosquitto_passwd's
// $7$ (PBKDF2-SHA512, 101 iterations) and $6$, htpasswd's bcrypt (cost 5)
// and the reference argon2id (t=2, m=1 MiB), and shoal passwd's argon2id
// (HashPassword's parameters).
func BenchmarkAuthenticate(b *testing.B) {
	dir := b.TempDir()
	var all []byte
	for _, f := range []string{"mosquitto.passwd", "others.passwd"} {
		data, err := os.ReadFile(filepath.Join("testdata", f))
		if err != nil {
			b.Fatal(err)
		}
		all = append(all, data...)
	}
	path := filepath.Join(dir, "passwd")
	if err := os.WriteFile(path, all, 0o600); err != nil {
		b.Fatal(err)
	}
	if err := SetPassword(path, "acme-shoal", []byte("shoal pass")); err != nil {
		b.Fatal(err)
	}
	pw, err := OpenPasswords(path, nil)
	if err != nil {
		b.Fatal(err)
	}
	for _, tc := range []struct{ name, user, pass string }{
		{"mosquitto-$7$", "acme-alice", "correct horse"},
		{"mosquitto-$6$", "legacy-carol", "sha512 only"},
		{"bcrypt-cost5", "acme-erin", "bcrypt pass"},
		{"shoal-passwd-argon2id", "acme-shoal", "shoal pass"},
		{"unknown-user", "acme-nobody", "x"},
	} {
		b.Run(tc.name, func(b *testing.B) {
			pass := []byte(tc.pass)
			for b.Loop() {
				err := pw.Authenticate(tc.user, pass)
				if (err == nil) == (tc.user == "acme-nobody") {
					b.Fatalf("Authenticate(%s): %v", tc.user, err)
				}
			}
		})
	}
}
