package sqlqueue_test

import (
	"fmt"

	"github.com/settlehq/settle/core/sqlqueue"
)

// A table with renamed columns and no processed_at (ack deletes); names are validated before
// any dialect quotes them.
func ExampleTable() {
	t := sqlqueue.Table{Name: "outgoing_mail", Columns: sqlqueue.Columns{
		ID: "mail_id", Payload: "body", Attempt: "tries", RetryAfter: "not_before", LockedUntil: "lease",
	}}
	fmt.Println(t.Validate())
	t.Columns.Attempt = "tries; DROP TABLE outgoing_mail"
	fmt.Println(t.Validate())
	// Output:
	// <nil>
	// sqlqueue: table outgoing_mail: invalid name "tries; DROP TABLE outgoing_mail" for the attempt column
}
