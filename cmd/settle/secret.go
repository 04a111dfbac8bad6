package main

import (
	"bytes"
	"flag"
	"io"
	"net/url"
	"os"
	"regexp"
	"slices"
	"strings"
)

// mask stands for a secret in everything the command prints.
const mask = "xxxxx"

// redact returns dsn for messages: the scheme, user, host and everything else as written, with
// a password masked where there is one (never one shown where there is none). It reads the
// DSNs of every backend: URLs (postgres://, amqp://, nats://, sqlite://), go-sql-driver's
// user:pw@tcp(host:3306)/db after mysql:// or mariadb:// or alone, and libpq's key=value
// form. A query parameter or key whose name says password, secret or token is masked too, and
// so is the user of a NATS URL without a password: nats.go takes it as the token.
func redact(dsn string) string {
	for _, p := range secretParts(dsn) {
		dsn = dsn[:p.start] + mask + dsn[p.end:]
	}
	return dsn
}

// span is a secret's place in a DSN, [start, end).
type span struct{ start, end int }

// secretParts returns where dsn holds secrets, last first (so that masking one keeps the
// others' offsets).
func secretParts(dsn string) []span {
	var out []span
	scheme, rest, hasScheme := strings.Cut(dsn, "://")
	base := len(dsn) - len(rest)
	switch s := strings.ToLower(scheme); {
	case hasScheme && (s == "mysql" || s == "mariadb"):
		out = mysqlSecrets(rest, base)
	case hasScheme && (s == "nats" || s == "tls"):
		// nats.go takes a comma-separated list of server URLs.
		off := 0
		for _, u := range strings.Split(dsn, ",") {
			if _, r, ok := strings.Cut(u, "://"); ok {
				out = append(out, urlSecrets(r, off+len(u)-len(r), true)...)
			}
			off += len(u) + 1
		}
	case hasScheme:
		out = urlSecrets(rest, base, false)
	case strings.HasPrefix(dsn, "sqlite:"):
		out = querySecrets(dsn, 0)
	case keyValue.MatchString(dsn):
		for _, m := range kvSecret.FindAllStringSubmatchIndex(dsn, -1) {
			out = append(out, span{m[6], m[7]})
		}
	case strings.Contains(dsn, "@"):
		out = mysqlSecrets(dsn, 0)
	}
	slices.SortFunc(out, func(a, b span) int { return b.start - a.start })
	return out
}

// urlSecrets finds the password of a URL's authority (rest follows "scheme://" at offset
// base; token says a user without a password is a token) and its secret query parameters.
func urlSecrets(rest string, base int, token bool) []span {
	var out []span
	end := strings.IndexAny(rest, "/?#")
	if end < 0 {
		end = len(rest)
	}
	if at := strings.LastIndex(rest[:end], "@"); at >= 0 {
		user, pw, hasPw := strings.Cut(rest[:at], ":")
		switch {
		case hasPw && pw != "":
			out = append(out, span{base + len(user) + 1, base + at})
		case !hasPw && token && user != "":
			out = append(out, span{base, base + at})
		}
	}
	return append(out, querySecrets(rest[end:], base+end)...)
}

// mysqlSecrets finds the password of go-sql-driver's [user[:password]@][net[(addr)]]/db[?params]
// as the driver reads it (the last '/', the last '@' before it, the first ':' before that),
// and its secret parameters.
func mysqlSecrets(dsn string, base int) []span {
	var out []span
	slash := strings.LastIndex(dsn, "/")
	if slash < 0 {
		slash = len(dsn)
	}
	if at := strings.LastIndex(dsn[:slash], "@"); at >= 0 {
		if colon := strings.Index(dsn[:at], ":"); colon >= 0 && colon+1 < at {
			out = append(out, span{base + colon + 1, base + at})
		}
	}
	return append(out, querySecrets(dsn[slash:], base+slash)...)
}

// querySecrets finds the values of secret parameters in the query of s (from its first '?').
func querySecrets(s string, base int) []span {
	q := strings.Index(s, "?")
	if q < 0 {
		return nil
	}
	var out []span
	off := base + q + 1
	for _, kv := range strings.Split(s[q+1:], "&") {
		if k, v, ok := strings.Cut(kv, "="); ok && v != "" && secretKey(k) {
			out = append(out, span{off + len(k) + 1, off + len(kv)})
		}
		off += len(kv) + 1
	}
	return out
}

// secretKey reports whether a parameter named k holds a secret (password, sslpassword,
// _auth_pass, pwd, secret, token…).
func secretKey(k string) bool {
	if u, err := url.QueryUnescape(k); err == nil {
		k = u
	}
	k = strings.ToLower(k)
	return strings.Contains(k, "pass") || strings.Contains(k, "secret") || strings.Contains(k, "token") || k == "pwd"
}

var (
	// keyValue is libpq's key=value form: it starts with a key and '='.
	keyValue = regexp.MustCompile(`^\s*[A-Za-z_]\w*\s*=`)
	// kvSecret is a secret key and its value, quoted ('it''s', with \' escapes) or bare.
	kvSecret = regexp.MustCompile(`(?i)(^|\s)(\w*(?:pass|secret|token)\w*|pwd)\s*=\s*('(?:[^'\\]|\\.)*'|[^\s']\S*)`)
)

// secrets returns the secret values in s, as written and as the driver decodes them, for
// scrubbing: s is a DSN, a --target string, or a flag's value.
func secrets(s string) []string {
	var out []string
	for _, p := range secretParts(s) {
		v := strings.Trim(s[p.start:p.end], "'")
		out = append(out, v)
		if u, err := url.PathUnescape(v); err == nil && u != v {
			out = append(out, u)
		}
	}
	return out
}

// secretFlags are the flags whose whole value is a secret (basic-auth's: after "user:").
var secretFlags = map[string]bool{"token": true, "basic-auth": true}

// flagSecrets returns the secrets in the value v of flag name ("" for an argument).
func flagSecrets(name, v string) []string {
	if !secretFlags[name] {
		return secrets(v)
	}
	if user, pw, ok := strings.Cut(v, ":"); ok && name == "basic-auth" && user != "" {
		v = pw
	}
	return []string{v}
}

// commandSecrets collects every secret the command line and the environment give: passwords
// in DSNs and targets, the console's token and basic-auth password.
func commandSecrets(args []string) []string {
	out := flagSecrets("dsn", os.Getenv("SETTLE_DSN"))
	out = append(out, flagSecrets("token", os.Getenv("SETTLE_CONSOLE_TOKEN"))...)
	out = append(out, flagSecrets("basic-auth", os.Getenv("SETTLE_CONSOLE_BASIC_AUTH"))...)
	for _, t := range strings.Fields(os.Getenv("SETTLE_TARGETS")) {
		out = append(out, secrets(t)...)
	}
	for i, a := range args {
		name, v, isFlag := strings.TrimLeft(a, "-"), "", strings.HasPrefix(a, "-")
		switch n, val, ok := strings.Cut(name, "="); {
		case isFlag && ok:
			name, v = n, val
		case isFlag && secretFlags[name] && i+1 < len(args):
			v = args[i+1]
		default:
			name, v = "", a
		}
		out = append(out, flagSecrets(name, v)...)
	}
	return out
}

// minSecret is the shortest secret the scrubber replaces: masking every "ab" of the output
// would garble it, and the command's own messages mask passwords of any length (redact).
const minSecret = 4

// scrubber is the command's stderr: it masks the secrets the command line and the environment
// gave in everything written, messages of drivers and parsers included (url.Parse quotes the
// URL it refuses, password and all).
type scrubber struct {
	w       io.Writer
	secrets [][]byte
}

func newScrubber(w io.Writer, secrets []string) *scrubber {
	s := &scrubber{w: w}
	for _, v := range secrets {
		if len(v) >= minSecret {
			s.secrets = append(s.secrets, []byte(v))
		}
	}
	// Longest first: a secret that contains another is masked whole.
	slices.SortFunc(s.secrets, func(a, b []byte) int { return len(b) - len(a) })
	return s
}

func (s *scrubber) Write(p []byte) (int, error) {
	out := p
	for _, v := range s.secrets {
		if bytes.Contains(out, v) {
			out = bytes.ReplaceAll(out, v, []byte(mask))
		}
	}
	if _, err := s.w.Write(out); err != nil {
		return 0, err
	}
	return len(p), nil
}

// hideDefaults masks the secrets in fs's defaults, which come from the environment and which
// -h and every flag error print: a DSN's password, the console's token and basic-auth
// password (a --target list's String masks its own).
func hideDefaults(fs *flag.FlagSet) {
	fs.VisitAll(func(f *flag.Flag) {
		if f.DefValue == "" {
			return
		}
		switch {
		case f.Name == "token":
			f.DefValue = mask
		case f.Name == "basic-auth":
			if user, _, ok := strings.Cut(f.DefValue, ":"); ok && user != "" {
				f.DefValue = user + ":" + mask
			} else {
				f.DefValue = mask
			}
		case f.Name == "dsn":
			f.DefValue = redact(f.DefValue)
		}
	})
}
