package chaos

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"
)

// Status is a trial's verdict.
type Status string

const (
	// StatusPass: every check held.
	StatusPass Status = "PASS"
	// StatusFail: a check failed that the trial does not expect to fail.
	StatusFail Status = "FAIL"
	// StatusXFail: the trial failed exactly in the checks its mark expects (a known defect, named by
	// the mark's reason and issue).
	StatusXFail Status = "XFAIL"
	// StatusXPass: a trial marked expected-to-fail passed: its defect looks fixed; remove the mark.
	StatusXPass Status = "XPASS"
)

// Row is one trial's line in the table.
type Row struct {
	Trial, Backend, Form string
	Result               *Result
	Status               Status
	// Note says why a trial is XFAIL or XPASS (the mark's reason and issue), or what failed.
	Note     string
	Duration time.Duration
}

// WriteTable prints rows as an aligned table: one line per trial with its backend and form,
// messages, faults, lost messages, duplicate handler runs, duplicate broker copies, double
// settlements, messages stuck at the end, messages that ended otherwise than their kind says,
// dead letters without a count, the longest time to recover and the status.
func WriteTable(w io.Writer, rows []Row) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "trial\tbackend\tform\tmsgs\tfaults\tlost\tdup runs\tdup copies\tdouble\tstuck\twrong\tnocount\trecover\ttime\tstatus")
	for _, r := range rows {
		res := r.Result
		if res == nil {
			res = &Result{}
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%s\t%s\t%s\n",
			r.Trial, r.Backend, r.Form, res.Messages, res.Faults, res.Counts[Lost], res.DupRuns, res.DupCopies, res.Counts[Double],
			res.Counts[Stuck], res.Counts[Wrong], res.Counts[NoCount], seconds(res.MaxRecover), seconds(r.Duration), r.Status)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, r := range rows {
		if r.Result != nil && r.Result.Parked > 0 {
			fmt.Fprintf(w, "\nnote %s/%s/%s: %d retry_after copies waited in a process that died before they were due (in-process delay: at-most-once, as documented)\n",
				r.Trial, r.Backend, r.Form, r.Result.Parked)
		}
		if r.Result != nil && r.Result.Charged > 0 {
			fmt.Fprintf(w, "\nnote %s/%s/%s: %d messages dead-lettered with attempts a crash or fault charged before any handler ran, at most one per crash (counted at claim or delivery, as documented)\n",
				r.Trial, r.Backend, r.Form, r.Result.Charged)
		}
		if r.Result != nil && r.Result.ServerMoved > 0 {
			fmt.Fprintf(w, "\nnote %s/%s/%s: %d messages moved by the server at its delivery limit (x-death, no count header) after a crash charged the delivery past the cap (the server's backstop, as documented)\n",
				r.Trial, r.Backend, r.Form, r.Result.ServerMoved)
		}
		if r.Result != nil && r.Result.Forked > 0 {
			fmt.Fprintf(w, "\nnote %s/%s/%s: %d messages finished twice, a copy and its original, after a crash between the copy and the original's ack (at-least-once, as documented)\n",
				r.Trial, r.Backend, r.Form, r.Result.Forked)
		}
		if r.Result != nil {
			for _, n := range r.Result.Notes {
				fmt.Fprintf(w, "\nnote %s/%s/%s: %s\n", r.Trial, r.Backend, r.Form, n)
			}
		}
		if r.Status == StatusPass {
			continue
		}
		fmt.Fprintf(w, "\n%s %s/%s/%s: %s\n", r.Status, r.Trial, r.Backend, r.Form, r.Note)
		if r.Result != nil {
			for _, v := range r.Result.Violations {
				fmt.Fprintf(w, "    %s\n", strings.ReplaceAll(v.String(), "\n", " "))
			}
		}
	}
	return nil
}

func seconds(d time.Duration) string {
	if d == 0 {
		return "-"
	}
	return fmt.Sprintf("%.2fs", d.Seconds())
}
