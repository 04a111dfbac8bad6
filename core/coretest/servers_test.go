package coretest

import "testing"

func TestRedact(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"amqp://guest:guest@127.0.0.1:5672/ (SETTLE_TEST_AMQP_URL)", "amqp://guest:xxxxx@127.0.0.1:5672/ (SETTLE_TEST_AMQP_URL)"},
		{"postgres://postgres@127.0.0.1:5432/test?sslmode=disable", "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"},
		{"127.0.0.1:3306", "127.0.0.1:3306"},
		{"nats://u:p@h:4222", "nats://u:xxxxx@h:4222"},
	} {
		if got := redact(c.in); got != c.want {
			t.Errorf("redact(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}
