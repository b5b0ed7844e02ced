package main

import (
	"bufio"
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"

	"golang.org/x/term"

	"github.com/shoal-mqtt/shoal/gateway/auth"
)

// maxPasswordLen is MQTT's limit on the password field.
const maxPasswordLen = 65535

// runPasswd is "shoal passwd FILE USER": it adds or replaces USER's entry
// in the password file FILE (argon2id). The password is asked for twice on
// the terminal, without echo, or read as one line from stdin when stdin is
// not a terminal.
func runPasswd(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("shoal passwd", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		_, _ = io.WriteString(stderr, `usage: shoal passwd FILE USER

Adds USER to the password file FILE, or replaces USER's password, with an
argon2id hash; every other line is kept. FILE is created (mode 0600) when
missing. The password is asked for twice on a terminal, or read as one line
from stdin:

  printf '%s\n' "$PASSWORD" | shoal passwd /etc/shoal/passwd acme-alice

FILE may also hold entries made by Mosquitto's mosquitto_passwd.
`)
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if fs.NArg() != 2 {
		fs.Usage()
		return 2
	}
	file, user := fs.Arg(0), fs.Arg(1)
	password, err := readPassword(stdin, stderr)
	if err != nil {
		fmt.Fprintln(stderr, "shoal passwd:", err)
		return 1
	}
	defer clear(password)
	if err := auth.SetPassword(file, user, password); err != nil {
		fmt.Fprintln(stderr, "shoal passwd:", err)
		return 1
	}
	fmt.Fprintf(stdout, "shoal passwd: password of %q set in %s\n", user, file)
	return 0
}

// readPassword asks for the password twice on a terminal, or reads one
// line (without its "\n" or "\r\n") from any other stdin.
func readPassword(stdin io.Reader, prompt io.Writer) ([]byte, error) {
	var password []byte
	if f, ok := stdin.(*os.File); ok && term.IsTerminal(int(f.Fd())) {
		fd := int(f.Fd())
		fmt.Fprint(prompt, "Password: ")
		first, err := term.ReadPassword(fd)
		fmt.Fprintln(prompt)
		if err != nil {
			return nil, fmt.Errorf("read password: %w", err)
		}
		fmt.Fprint(prompt, "Reenter password: ")
		second, err := term.ReadPassword(fd)
		fmt.Fprintln(prompt)
		if err != nil {
			clear(first)
			return nil, fmt.Errorf("read password: %w", err)
		}
		same := bytes.Equal(first, second)
		clear(second)
		if !same {
			clear(first)
			return nil, errors.New("the passwords do not match")
		}
		password = first
	} else {
		line, err := bufio.NewReader(io.LimitReader(stdin, maxPasswordLen+3)).ReadBytes('\n')
		if err != nil && !errors.Is(err, io.EOF) {
			return nil, fmt.Errorf("read password from stdin: %w", err)
		}
		line = bytes.TrimSuffix(line, []byte("\n"))
		password = bytes.TrimSuffix(line, []byte("\r"))
	}
	switch {
	case len(password) == 0:
		return nil, errors.New("empty password")
	case len(password) > maxPasswordLen:
		clear(password)
		return nil, fmt.Errorf("password longer than %d bytes (MQTT's limit)", maxPasswordLen)
	}
	return password, nil
}
