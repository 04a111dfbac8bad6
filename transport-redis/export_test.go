package redisq

import "context"

// Publish reaches the unexported publish path from the package's tests.
func Publish(ctx context.Context, c *Client, stream string, body []byte, headers map[string]string) (string, error) {
	return c.publish(ctx, stream, body, headers)
}
