package amqp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// QueueCounter reads a queue's message counts where AMQP cannot. A passive queue.declare counts
// ready messages only: measured on RabbitMQ 3.10.8, a quorum queue holding one unacknowledged
// delivery and four messages waiting to be dead-lettered at-least-once (their destination
// missing) answered 0, while its management API counted 5 messages, 0 ready, 1 unacknowledged.
// So the messages a quorum queue is dead-lettering — out of consumers' sight and out of the ready
// count, for as long as the destination refuses them — can only be counted through the
// management plugin. ManagementAPI is the QueueCounter for a real RabbitMQ; amqptest's Broker
// is one for the in-process broker. Give it to NewOps with OpsCounts.
type QueueCounter interface {
	// QueueCounts returns the counts of the named queue.
	QueueCounts(ctx context.Context, queue string) (QueueCounts, error)
}

// QueueCounts are one queue's messages by state.
type QueueCounts struct {
	// Messages is every message the queue holds: ready, unacknowledged and, on a quorum queue,
	// waiting to be dead-lettered.
	Messages int64
	// Ready messages can be delivered now.
	Ready int64
	// Unacknowledged messages were delivered and are not settled yet.
	Unacknowledged int64
}

// DeadLettering is how many of the queue's messages are neither ready nor unacknowledged: on a
// quorum queue, those it is dead-lettering at-least-once and has not delivered to their
// destination yet.
func (c QueueCounts) DeadLettering() int64 { return max(c.Messages-c.Ready-c.Unacknowledged, 0) }

// managementAPI reads queue counts from RabbitMQ's management HTTP API.
type managementAPI struct {
	base       string // scheme://host:port[/path], without credentials
	user, pass string
	vhost      string
	client     *http.Client
}

// ManagementAPI returns the QueueCounter of the RabbitMQ management plugin at base, for queues
// of vhost ("/" for the default). base is the API's root URL with the credentials of a user
// allowed to see the vhost's queues (the monitoring tag is enough), e.g.
// "http://guest:guest@127.0.0.1:15672" (the API's own /api path is added). Each count is one
// GET /api/queues/{vhost}/{queue}, bounded by 10 s. The counts are as old as the plugin's last
// statistics collection (collect_statistics_interval, 5 s by default).
func ManagementAPI(base, vhost string) (QueueCounter, error) {
	u, err := url.Parse(base)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("amqp.ManagementAPI(%q): not an http:// or https:// URL of the management plugin", redact(base))
	}
	if vhost == "" {
		return nil, errors.New("amqp.ManagementAPI: no virtual host (\"/\" is the default one)")
	}
	m := &managementAPI{vhost: vhost, client: &http.Client{Timeout: 10 * time.Second}}
	if u.User != nil {
		m.user = u.User.Username()
		m.pass, _ = u.User.Password()
		u.User = nil
	}
	m.base = strings.TrimSuffix(u.String(), "/")
	return m, nil
}

// QueueCounts reads GET /api/queues/{vhost}/{queue}.
func (m *managementAPI) QueueCounts(ctx context.Context, queue string) (QueueCounts, error) {
	where := m.base + "/api/queues/" + url.PathEscape(m.vhost) + "/" + url.PathEscape(queue)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, where, nil)
	if err != nil {
		return QueueCounts{}, err
	}
	if m.user != "" {
		req.SetBasicAuth(m.user, m.pass)
	}
	resp, err := m.client.Do(req)
	if err != nil {
		return QueueCounts{}, fmt.Errorf("management API %s: %w", where, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return QueueCounts{}, fmt.Errorf("management API %s: %w", where, err)
	}
	if resp.StatusCode != http.StatusOK {
		return QueueCounts{}, fmt.Errorf("management API %s: %s: %.200s", where, resp.Status, body)
	}
	var q struct {
		Messages       *int64 `json:"messages"`
		Ready          *int64 `json:"messages_ready"`
		Unacknowledged *int64 `json:"messages_unacknowledged"`
	}
	if err := json.Unmarshal(body, &q); err != nil {
		return QueueCounts{}, fmt.Errorf("management API %s: %w", where, err)
	}
	if q.Messages == nil || q.Ready == nil || q.Unacknowledged == nil {
		return QueueCounts{}, fmt.Errorf("management API %s: no message counts for queue %q yet (the plugin collects them every few seconds)", where, queue)
	}
	return QueueCounts{Messages: *q.Messages, Ready: *q.Ready, Unacknowledged: *q.Unacknowledged}, nil
}
