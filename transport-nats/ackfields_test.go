package natsjs

import (
	"testing"

	"github.com/nats-io/nats.go"
)

// ackFields must read what nats.go's Metadata reads, from every reply subject it accepts, and
// leave every other subject to Metadata.
func TestAckFieldsAgreesWithMetadata(t *testing.T) {
	cases := []struct {
		reply string
		ok    bool
	}{
		{"$JS.ACK.orders.worker.3.1042.998.1764547200123456789.17", true},
		{"$JS.ACK._.ACCHASH.orders.worker.1.7.7.1764547200123456789.0.rAnDoM", true},
		{"$JS.ACK.hub.ACCHASH.orders.worker.2.9.8.1764547200123456789.4", true},
		{"$JS.ACK.hub.ACCHASH.orders.worker.2.9.8.1764547200123456789.4.tok.extra", true},
		{"$JS.ACK.orders.worker.3.1042.998.1764547200123456789.x", false},   // pending not a number
		{"$JS.ACK.orders.worker.3.1042.998.1764547200123456789", false},     // 8 tokens
		{"$JS.ACK.a.b.orders.worker.3.1042.998.17645472001", false},         // 10 tokens
		{"$JS.ACK.orders.worker.x3.1042.998.1764547200123456789.17", false}, // not a number
		{"$JS.ACK.orders.worker.0.1042.998.1764547200123456789.17", false},  // no delivery
		{"$JS.ACK.orders.worker.3.1042.998.+1764547200123456789.17", false}, // a sign
		{"$JS.ACK..worker.3.1042.998.1764547200123456789.17", false},        // no stream
		{"_INBOX.abc.def", false},
		{"", false},
	}
	for _, c := range cases {
		f, ok := ackFields(c.reply)
		if ok != c.ok {
			t.Errorf("ackFields(%q) ok = %v, want %v", c.reply, ok, c.ok)
		}
		if ok {
			sameAsMetadata(t, c.reply, f)
		}
	}
}

func sameAsMetadata(t *testing.T, reply string, f metaFields) {
	t.Helper()
	meta, err := (&nats.Msg{Subject: "s", Reply: reply, Sub: &nats.Subscription{}}).Metadata()
	if err != nil {
		t.Fatalf("ackFields accepted %q, which Metadata refuses: %v", reply, err)
	}
	if f.stream != meta.Stream || f.delivered != meta.NumDelivered || f.seq != meta.Sequence.Stream || !f.stored.Equal(meta.Timestamp) ||
		f.pending != meta.NumPending {
		t.Fatalf("ackFields(%q) = %+v; Metadata: stream %q delivered %d seq %d stored %v pending %d",
			reply, f, meta.Stream, meta.NumDelivered, meta.Sequence.Stream, meta.Timestamp, meta.NumPending)
	}
}

func FuzzAckFields(f *testing.F) {
	f.Add("$JS.ACK.orders.worker.3.1042.998.1764547200123456789.17")
	f.Add("$JS.ACK._.ACCHASH.orders.worker.1.7.7.1764547200123456789.0.rAnDoM")
	f.Fuzz(func(t *testing.T, reply string) {
		if fl, ok := ackFields(reply); ok {
			sameAsMetadata(t, reply, fl)
		}
	})
}
