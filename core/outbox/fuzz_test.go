package outbox

import (
	"encoding/hex"
	"maps"
	"strconv"
	"testing"
)

// FuzzOutboxHeaders: what Record stores in the headers column reads back, through
// DecodeHeaders, as exactly the headers it was given plus the batch token; headers it cannot
// keep exactly are refused when recording. DecodeHeaders never panics, and what it accepts
// is stable through another encoding.
func FuzzOutboxHeaders(f *testing.F) {
	f.Add([]byte(`{"tenant":"acme"}`), "tenant", "acme", "0123456789abcdef")
	f.Add([]byte(`{"settle-outbox-batch":"x"}`), HeaderBatch, "x", "")
	f.Add([]byte(`[]`), "k", "\xff", "t")
	f.Add([]byte(`{"a":1}`), "\xed\xa0\x80", "v", "t")
	f.Add([]byte(``), "", "", "")
	f.Add([]byte(`null`), "k", "<\u2028>", "t")
	f.Fuzz(func(t *testing.T, raw []byte, k, v, seed string) {
		token := hex.EncodeToString([]byte(seed)) // Record's tokens are hex
		if h, err := DecodeHeaders(raw); err == nil {
			enc, err := encodeHeaders(h, "")
			if err != nil {
				t.Fatalf("re-encoding %v: %v", h, err)
			}
			var again map[string]string
			if enc != nil {
				if again, err = DecodeHeaders([]byte(enc.(string))); err != nil {
					t.Fatalf("decoding %q: %v", enc, err)
				}
			}
			if !maps.Equal(again, h) && len(again)+len(h) > 0 {
				t.Fatalf("headers %v read back as %v", h, again)
			}
		}

		in := map[string]string{k: v}
		if err := checkHeaders(in); err != nil {
			return // refused when recording
		}
		enc, err := encodeHeaders(in, token)
		if err != nil {
			t.Fatalf("encoding accepted headers %q: %v", in, err)
		}
		if enc == nil {
			t.Fatalf("headers %q encoded to NULL", in)
		}
		got, err := DecodeHeaders([]byte(enc.(string)))
		if err != nil {
			t.Fatalf("decoding %q: %v", enc, err)
		}
		want := in
		if token != "" {
			want = withHeader(in, HeaderBatch, token)
		}
		if !maps.Equal(got, want) {
			t.Fatalf("headers %q with token %q stored as %q, read back as %q", in, token, enc, got)
		}
	})
}

// FuzzRecordID: the receiver takes a settle-outbox-id header for a record only when it is the
// relay's own spelling of a positive id (strconv.FormatInt): "+5", "007", " 7" or "5x" are
// malformed, not record 5 or 7.
func FuzzRecordID(f *testing.F) {
	for _, s := range []string{"1", "7", "+5", "007", "0", "-1", " 7", "5x", "9223372036854775807", "9223372036854775808", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		id, ok := parseRecordID(s)
		if !ok {
			if n, err := strconv.ParseInt(s, 10, 64); err == nil && n > 0 && strconv.FormatInt(n, 10) == s {
				t.Fatalf("parseRecordID(%q) refused the relay's own spelling of %d", s, n)
			}
			return
		}
		if id <= 0 || strconv.FormatInt(id, 10) != s {
			t.Fatalf("parseRecordID(%q) = %d", s, id)
		}
	})
}
