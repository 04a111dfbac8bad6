package core

import (
	"errors"
	"maps"
	"strings"
	"testing"
	"time"
)

func TestPublishOptionsApply(t *testing.T) {
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	var o PublishOptions
	err := o.Apply(MessageID("r-1"), CorrelationID("req-9"), OrderingKey("cust-7"), DedupKey("refund-r-1"),
		Headers(map[string]string{"tenant": "acme", "trace": "t-1"}), Header("tenant", "globex"),
		NotBefore(at), Priority(200))
	if err != nil {
		t.Fatal(err)
	}
	if o.id != "r-1" || o.correlationID != "req-9" || o.orderingKey != "cust-7" || o.dedupKey != "refund-r-1" ||
		!o.notBefore.Equal(at) || o.priority != 200 || o.delay != 0 {
		t.Fatalf("options %+v", o)
	}
	if want := map[string]string{"tenant": "globex", "trace": "t-1"}; !maps.Equal(o.headers, want) {
		t.Fatalf("headers %v, want %v (a later option overrides a key)", o.headers, want)
	}

	var d PublishOptions
	if err := d.Apply(Delay(time.Minute), Priority(0), Headers(nil)); err != nil {
		t.Fatal(err)
	}
	if d.delay != time.Minute || d.priority != 0 || d.headers != nil {
		t.Fatalf("options %+v", d)
	}
}

func TestHeadersAreCopied(t *testing.T) {
	h := map[string]string{"tenant": "acme"}
	var o PublishOptions
	if err := o.Apply(Headers(h)); err != nil {
		t.Fatal(err)
	}
	h["tenant"] = "changed"
	if o.headers["tenant"] != "acme" {
		t.Fatal("the option kept the caller's map")
	}
}

// Every invalid option is refused with an error that names it.
func TestPublishOptionsRefused(t *testing.T) {
	long := strings.Repeat("x", 256)
	for _, c := range []struct {
		opts []PublishOption
		want string
	}{
		{[]PublishOption{MessageID("")}, `core.MessageID(""): the message id is empty`},
		{[]PublishOption{MessageID("  ")}, `core.MessageID("  "): the message id is empty`},
		{[]PublishOption{MessageID(long)}, `core.MessageID("xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx…"): the message id is 256 bytes; at most 255`},
		{[]PublishOption{MessageID("a\nb")}, `core.MessageID("a\nb"): the message id has a control character`},
		{[]PublishOption{MessageID("a\xffb")}, `core.MessageID("a\xffb"): the message id is not valid UTF-8`},
		{[]PublishOption{CorrelationID("")}, `core.CorrelationID(""): the correlation id is empty`},
		{[]PublishOption{OrderingKey("")}, `core.OrderingKey(""): the ordering key is empty`},
		{[]PublishOption{DedupKey("")}, `core.DedupKey(""): the dedup key is empty`},
		{[]PublishOption{Delay(-time.Second)}, `core.Delay(-1s): the delay is negative`},
		{[]PublishOption{NotBefore(time.Time{})}, `core.NotBefore(time.Time{}): the time is zero`},
		{[]PublishOption{Delay(time.Second), NotBefore(time.Now())}, `core.Delay and core.NotBefore both given`},
		{[]PublishOption{Priority(-1)}, `core.Priority(-1): a priority is 1..255 (0 for the default)`},
		{[]PublishOption{Priority(256)}, `core.Priority(256): a priority is 1..255`},
		{[]PublishOption{Headers(map[string]string{"": "v"})}, `core.Headers: a header key is empty`},
		{[]PublishOption{Headers(map[string]string{"Settle-Retry-Count": "1"})}, `core.Headers: header "Settle-Retry-Count": the prefix settle- is reserved`},
		{[]PublishOption{Header("settle-origin", "q")}, `core.Header("settle-origin", "q"): the prefix settle- is reserved`},
		{[]PublishOption{Header("a\tb", "v")}, `the key has a control character`},
		{[]PublishOption{Header("k", "line\r\nbreak")}, `core.Header("k", "line\r\nbreak"): the value has a CR, LF or NUL`},
		{[]PublishOption{nil}, `publish option 0 is nil`},
	} {
		var o PublishOptions
		err := o.Apply(c.opts...)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("got %v, want an error containing %q", err, c.want)
		}
	}
}

type txKey struct{}

func inTx(tx string) PublishOption {
	return PublishOptionFunc(func(o *PublishOptions) error {
		o.SetExt(txKey{}, "sql.InTx(tx)", tx)
		return nil
	})
}

func TestPublishExtOptions(t *testing.T) {
	var o PublishOptions
	if err := o.Apply(inTx("tx-1")); err != nil {
		t.Fatal(err)
	}
	// A sender that does not read the option refuses it, naming it and itself.
	err := o.Unread(`amqp exchange "payouts"`)
	var ue *UnsupportedError
	if !errors.As(err, &ue) || !errors.Is(err, ErrUnsupported) || ue.Option != "sql.InTx(tx)" {
		t.Fatalf("unread ext option: %v", err)
	}
	if want := `sql.InTx(tx) on amqp exchange "payouts": the option belongs to another backend`; !strings.HasPrefix(err.Error(), want) {
		t.Fatalf("error %q, want it to start with %q", err, want)
	}
	// A sender that reads it accepts it.
	v, ok := o.Ext(txKey{})
	if !ok || v != "tx-1" {
		t.Fatalf("Ext = %v, %v", v, ok)
	}
	if err := o.Unread("sql"); err != nil {
		t.Fatalf("after Ext: %v", err)
	}
	var none PublishOptions
	if _, ok := none.Ext(txKey{}); ok {
		t.Fatal("Ext found a value that was never set")
	}
	if err := none.Unread("sql"); err != nil {
		t.Fatal(err)
	}
	if err := (*PublishOptions)(nil).Unread("sql"); err != nil {
		t.Fatal(err)
	}
}

func TestUnsupportedError(t *testing.T) {
	err := error(&UnsupportedError{Option: "core.Priority", Backend: `amqp quorum queue "q" (RabbitMQ 3.x)`,
		Reason: "quorum queues of RabbitMQ before 4.0 have no priorities", Instead: "use a classic queue with x-max-priority"})
	want := `core.Priority on amqp quorum queue "q" (RabbitMQ 3.x): quorum queues of RabbitMQ before 4.0 have no priorities; use a classic queue with x-max-priority`
	if err.Error() != want {
		t.Fatalf("%q\nwant %q", err, want)
	}
	if !errors.Is(err, ErrUnsupported) || !errors.Is(err, errors.ErrUnsupported) {
		t.Fatal("does not match ErrUnsupported")
	}
	short := &UnsupportedError{Option: "core.DedupKey", Backend: "memory"}
	if short.Error() != "core.DedupKey on memory: not supported" {
		t.Fatalf("%q", short)
	}
}
