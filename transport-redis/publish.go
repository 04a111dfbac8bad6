package redisq

import (
	"context"
	"fmt"

	"github.com/redis/go-redis/v9"
)

// publish adds a message to stream: its body in the "body" field, each header as a field of its
// own. It returns the entry's id. A header named "body" is refused: it would be the payload.
//
// It stays unexported until settle's publish API (core.Target) is implemented for streams, so
// that no per-backend publish function has to be retired later.
func (c *Client) publish(ctx context.Context, stream string, body []byte, headers map[string]string) (string, error) {
	rdb, err := c.client()
	if err != nil {
		return "", err
	}
	values := make([]any, 0, 2+2*len(headers))
	values = append(values, BodyField, body)
	for k, v := range headers {
		if k == BodyField {
			return "", fmt.Errorf("redisq: publish to stream %q: a header named %q would be the payload's field", stream, BodyField)
		}
		values = append(values, k, v)
	}
	id, err := rdb.XAdd(ctx, &redis.XAddArgs{Stream: stream, Values: values}).Result()
	if err != nil {
		return "", fmt.Errorf("redisq: XADD to stream %q at %s: %w", stream, c.addr(), err)
	}
	return id, nil
}
