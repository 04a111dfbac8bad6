package asyncapi

import (
	"encoding/json"
	"fmt"

	"github.com/settlehq/settle/core"
)

// The component schemas of the headers settle sets.
const (
	headersSchema     = "settle-headers"
	deadHeadersSchema = "settle-dead-letter-headers"
)

var (
	headersJSON     = headerSchema(false)
	deadHeadersJSON = headerSchema(true)
)

type headerProperty struct {
	Type        string `json:"type"`
	Description string `json:"description"`
	Pattern     string `json:"pattern,omitempty"`
	Format      string `json:"format,omitempty"`
	MaxLength   int    `json:"maxLength,omitempty"`
}

// headerSchema is the schema of the headers settle sets on the copies it publishes: the attempt
// count, and on a dead letter why and when it died.
func headerSchema(dead bool) json.RawMessage {
	props := map[string]headerProperty{
		core.HeaderRetryCount: {Type: "string", Pattern: "^(0|[1-9][0-9]*)$",
			Description: "How many deliveries the message has had, in decimal; set on the copies settle publishes (a retry, a delayed copy, a dead letter)."},
	}
	desc := "Headers settle sets on the copies of a message it publishes. Other headers (trace context) pass through."
	if dead {
		desc = "Headers of a dead letter: why and when the message died. A message the broker moved by itself (a quorum queue's delivery limit) carries the broker's own instead."
		props[core.HeaderOrigin] = headerProperty{Type: "string", Description: "The queue the message died in."}
		props[core.HeaderDeadAt] = headerProperty{Type: "string", Format: "date-time", Description: "When settle moved the message, RFC 3339 in UTC."}
		props[core.HeaderError] = headerProperty{Type: "string", MaxLength: core.MaxReasonBytes,
			Description: fmt.Sprintf("The last failure: the handler's error or what it asked for at the cap, at most %d bytes.", core.MaxReasonBytes)}
	}
	raw, err := json.Marshal(struct {
		Type        string                    `json:"type"`
		Description string                    `json:"description"`
		Properties  map[string]headerProperty `json:"properties"`
	}{"object", desc, props})
	if err != nil {
		panic(err) // fixed values of known types
	}
	return raw
}
