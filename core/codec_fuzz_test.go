package core_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/settlehq/settle/core"
)

// fuzzPayload is a typical handler payload type.
type fuzzPayload struct {
	Order string            `json:"order"`
	Cents int64             `json:"cents"`
	Tags  map[string]string `json:"tags"`
	Lines []float64         `json:"lines"`
	Note  *string           `json:"note"`
}

// FuzzCodecs: Raw hands bytes through unchanged both ways; JSON decodes exactly the valid JSON
// texts (but numbers beyond float64), and what it decoded (into any, or into a payload struct) encodes and decodes back to
// the same value.
func FuzzCodecs(f *testing.F) {
	for _, s := range []string{
		``, `null`, `{}`, `{"order":"o-1","cents":250}`, `{"order":"o","cents":1e3}`, `{"cents":9223372036854775808}`,
		`[1,2,3]`, `"\ud800"`, "\xff\xfe", `{"tags":{"a":"b"},"lines":[0.1,-2e-300],"note":null}`, `1e400`, `{"order":1}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		// Raw.
		out, err := core.Raw.Marshal(data)
		if err != nil || !bytes.Equal(out, data) {
			t.Fatalf("Raw.Marshal([]byte) = %q, %v", out, err)
		}
		if out, err := core.Raw.Marshal(string(data)); err != nil || !bytes.Equal(out, data) {
			t.Fatalf("Raw.Marshal(string) = %q, %v", out, err)
		}
		var b []byte
		var s string
		if err := core.Raw.Unmarshal(data, &b); err != nil || !bytes.Equal(b, data) {
			t.Fatalf("Raw.Unmarshal into []byte = %q, %v", b, err)
		}
		if err := core.Raw.Unmarshal(data, &s); err != nil || s != string(data) {
			t.Fatalf("Raw.Unmarshal into string = %q, %v", s, err)
		}
		if _, err := core.Raw.Marshal(len(data)); err == nil {
			t.Fatal("Raw.Marshal(int) succeeded")
		}

		// JSON into any.
		var v any
		err = core.JSON.Unmarshal(data, &v)
		var number *json.UnmarshalTypeError
		switch valid := json.Valid(data); {
		case err == nil && !valid:
			t.Fatalf("JSON.Unmarshal accepted %q, which is not JSON", data)
		case err != nil && valid && !(errors.As(err, &number) && strings.HasPrefix(number.Value, "number")):
			// Only a number beyond float64 (1e400) keeps valid JSON from decoding into any.
			t.Fatalf("JSON.Unmarshal(%q), valid JSON: %v", data, err)
		}
		if err == nil {
			enc, err := core.JSON.Marshal(v)
			if err != nil {
				t.Fatalf("JSON.Marshal of what %q decoded to: %v", data, err)
			}
			var again any
			if err := core.JSON.Unmarshal(enc, &again); err != nil || !reflect.DeepEqual(again, v) {
				t.Fatalf("JSON round trip of %q: %#v, then %#v (%v)", data, v, again, err)
			}
		}

		// JSON into a payload struct.
		var p fuzzPayload
		if core.JSON.Unmarshal(data, &p) == nil {
			enc, err := core.JSON.Marshal(p)
			if err != nil {
				t.Fatalf("JSON.Marshal(%+v): %v", p, err)
			}
			var again fuzzPayload
			if err := core.JSON.Unmarshal(enc, &again); err != nil || !reflect.DeepEqual(again, p) {
				t.Fatalf("JSON round trip of %q: %+v, then %+v (%v)", data, p, again, err)
			}
		}
	})
}
