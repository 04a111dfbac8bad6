package main

import (
	"bytes"
	"strings"
	"testing"
)

// TestRedact masks a password where there is one, in every backend's DSN forms, and keeps the
// scheme, the user and the rest as written.
func TestRedact(t *testing.T) {
	for in, want := range map[string]string{
		// PostgreSQL: URL, password in the query, libpq's key=value.
		"postgres://postgres@127.0.0.1:5432/test?sslmode=disable": "postgres://postgres@127.0.0.1:5432/test?sslmode=disable",
		"postgres://u:s3cret@h:5432/db":                           "postgres://u:xxxxx@h:5432/db",
		"postgresql://u:p%40ss@h/db?sslmode=require&password=p2":  "postgresql://u:xxxxx@h/db?sslmode=require&password=xxxxx",
		"postgres://h/db?user=u&password=s3cret&sslpassword=k":    "postgres://h/db?user=u&password=xxxxx&sslpassword=xxxxx",
		"postgres://u:@h/db":                                      "postgres://u:@h/db",
		"host=db user=u password=s3cret dbname=x":                 "host=db user=u password=xxxxx dbname=x",
		"host=db user=u password = 's3 c\\'ret' dbname=x":         "host=db user=u password = xxxxx dbname=x",
		"host=db user=u dbname=x":                                 "host=db user=u dbname=x",
		// MySQL/MariaDB: go-sql-driver's form, after mysql:// or alone.
		"mysql://root@tcp(127.0.0.1:3306)/test?parseTime=true": "mysql://root@tcp(127.0.0.1:3306)/test?parseTime=true",
		"mysql://root:s3cret@tcp(127.0.0.1:3306)/test":         "mysql://root:xxxxx@tcp(127.0.0.1:3306)/test",
		"mariadb://u:p@ss:w/rd@tcp(h:3306)/db":                 "mariadb://u:xxxxx@tcp(h:3306)/db",
		"root:s3cret@tcp(h:3306)/db?parseTime=true":            "root:xxxxx@tcp(h:3306)/db?parseTime=true",
		"root@unix(/tmp/mysql.sock)/db":                        "root@unix(/tmp/mysql.sock)/db",
		// SQLite: a path; go-sqlite3's user authentication parameters.
		"sqlite:///var/q.db": "sqlite:///var/q.db",
		"sqlite:/var/q.db":   "sqlite:/var/q.db",
		"sqlite:///var/q.db?_auth&_auth_user=a&_auth_pass=s3": "sqlite:///var/q.db?_auth&_auth_user=a&_auth_pass=xxxxx",
		// RabbitMQ.
		"amqp://guest:guest@127.0.0.1:5672/": "amqp://guest:xxxxx@127.0.0.1:5672/",
		"amqps://user@h/vhost":               "amqps://user@h/vhost",
		"amqp://h:5672/%2f":                  "amqp://h:5672/%2f",
		// NATS: a user without a password is a token; server lists.
		"nats://127.0.0.1:4222":                "nats://127.0.0.1:4222",
		"nats://u:s3cret@h:4222":               "nats://u:xxxxx@h:4222",
		"nats://t0ken@h:4222":                  "nats://xxxxx@h:4222",
		"nats://h1:4222,nats://u:pw@h2:4222":   "nats://h1:4222,nats://u:xxxxx@h2:4222",
		"tls://a:b@h1:4222,tls://c:d@h2:4222/": "tls://a:xxxxx@h1:4222,tls://c:xxxxx@h2:4222/",
		"":                                     "",
		"oracle://scott:tiger@h/orcl":          "oracle://scott:xxxxx@h/orcl",
	} {
		if got := redact(in); got != want {
			t.Errorf("redact(%q) = %q, want %q", in, got, want)
		}
	}
}

// The scrubber masks every secret the command line and the environment give, in whatever is
// written to it: a parser's message quoting a URL, a flag default.
func TestScrubber(t *testing.T) {
	t.Setenv("SETTLE_DSN", "postgres://u:envpass@h/db")
	t.Setenv("SETTLE_CONSOLE_TOKEN", "tok-123456")
	t.Setenv("SETTLE_CONSOLE_BASIC_AUTH", "admin:basicpw")
	t.Setenv("SETTLE_TARGETS", "amqp://g:tgtpass@h/ sqlite:///q.db")
	args := []string{"console", "--dsn=mysql://r:argpass@tcp(h)/db", "--basic-auth", "op:argbasic", "--target", "nats://natstoken@h"}
	var buf bytes.Buffer
	w := newScrubber(&buf, commandSecrets(args))
	for _, s := range []string{"envpass", "tok-123456", "basicpw", "tgtpass", "argpass", "argbasic", "natstoken"} {
		buf.Reset()
		if _, err := w.Write([]byte(`parse "x://` + s + `@h": invalid`)); err != nil {
			t.Fatal(err)
		}
		if strings.Contains(buf.String(), s) || !strings.Contains(buf.String(), "xxxxx") {
			t.Errorf("secret %q written as %q", s, buf.String())
		}
	}
	buf.Reset()
	w.Write([]byte("admin op g u r"))
	if buf.String() != "admin op g u r" {
		t.Errorf("users masked: %q", buf.String())
	}
}

// TestSecretsNeverPrinted: -h and a bad flag print the defaults, which come from the
// environment; errors quote DSNs, and parsers quote the URLs they refuse. None shows a secret.
func TestSecretsNeverPrinted(t *testing.T) {
	t.Setenv("SETTLE_DSN", "postgres://app:envs3cret@127.0.0.1:1/db?connect_timeout=2")
	t.Setenv("SETTLE_CONSOLE_TOKEN", "envt0ken")
	t.Setenv("SETTLE_CONSOLE_BASIC_AUTH", "admin:envbas1c")
	t.Setenv("SETTLE_TARGETS", "amqp://g:envtarg3t@127.0.0.1:1/?queue=q")
	secrets := []string{"envs3cret", "envt0ken", "envbas1c", "envtarg3t", "args3cret", "natspa55"}
	for _, c := range []struct {
		name string
		args []string
		code int
		says string
	}{
		{"stats -h", []string{"stats", "-h"}, exitOK, "postgres://app:xxxxx@127.0.0.1:1/db"},
		{"bad flag", []string{"stats", "--bogus"}, exitUsage, "postgres://app:xxxxx@127.0.0.1:1/db"},
		{"dead ls -h", []string{"dead", "ls", "-h"}, exitOK, "app:xxxxx@"},
		{"console -h", []string{"console", "-h"}, exitOK, `admin:xxxxx`},
		{"unreachable", []string{"stats", "--table", "jobs"}, exitUnreachable, "postgres at postgres://app:xxxxx@127.0.0.1:1/db"},
		{"unreachable from a flag", []string{"stats", "--dsn", "amqp://g:args3cret@127.0.0.1:1/", "--queue", "q"}, exitUnreachable, "amqp://g:xxxxx@127.0.0.1:1/"},
		{"no scheme", []string{"stats", "--dsn", "host=h user=u password=args3cret"}, exitUsage, "password=xxxxx"},
		{"url parse error", []string{"stats", "--dsn", "nats://u:natspa55@h:bad", "--queue", "q"}, exitUnreachable, `parse "nats://u:xxxxx@h:bad"`},
	} {
		t.Run(c.name, func(t *testing.T) {
			code, out, errOut := settle(t, c.args...)
			if code != c.code || !strings.Contains(out+errOut, c.says) {
				t.Errorf("settle %q: exit %d, %s%s; want %d mentioning %q", c.args, code, out, errOut, c.code, c.says)
			}
			for _, s := range secrets {
				if strings.Contains(out+errOut, s) {
					t.Errorf("settle %q prints the secret %q:\n%s%s", c.args, s, out, errOut)
				}
			}
		})
	}
}
