package engine

import "strings"

// Inserts renders the INSERTs a publisher of q runs, by (delay, headers): index 1 sets
// retry_after, 2 the headers, 3 both. Each takes payload, then group, attempt and created_at
// where the table has them, then retry_after and headers; with RETURNING, the new id comes back.
func Inserts(q *Queue) [4]string {
	var out [4]string
	s, d := q.Schema, q.D
	for i := range out {
		delay, headers := i&1 != 0, i&2 != 0
		cols := []string{s.Payload}
		for _, c := range []string{s.Group, s.Attempt, s.CreatedAt} {
			if c != "" {
				cols = append(cols, c)
			}
		}
		if delay && s.RetryAfter != "" {
			cols = append(cols, s.RetryAfter)
		}
		if headers && s.Headers != "" {
			cols = append(cols, s.Headers)
		}
		ph := make([]string, len(cols))
		for j := range cols {
			ph[j] = d.Placeholder(j + 1)
		}
		out[i] = "INSERT INTO " + s.QTable + " (" + strings.Join(cols, ", ") + ") VALUES (" + strings.Join(ph, ", ") + ")"
		if d.Returning() {
			out[i] += " RETURNING " + s.ID
		}
	}
	return out
}
