package decisionlog

import (
	"log/slog"
	"sync"
	"sync/atomic"
	"time"
)

// Backoff bounds the wait between retries of a failed write: Min after the
// first failure, doubling up to Max.
type Backoff struct{ Min, Max time.Duration }

// DefaultBackoff is a failed write's retry schedule.
var DefaultBackoff = Backoff{Min: 10 * time.Millisecond, Max: 5 * time.Second}

// failureLogEvery bounds how often failing writes are logged: a full disk
// must not flood the process's own log too.
const failureLogEvery = 10 * time.Second

// failures is the writer's state of health: whether writes fail, since
// when, how long to wait before the next attempt, and when it last said so.
// The writer goroutine updates it; RecordRequired reads it.
type failures struct {
	backoff Backoff
	log     *slog.Logger
	failing atomic.Bool

	mu         sync.Mutex
	lastErr    error
	next       time.Duration
	count      int // failed attempts since the last message
	total      int // failed attempts since writes last succeeded
	lastLogged time.Time
}

// current is the error writes fail with, nil while they succeed.
func (f *failures) current() error {
	if !f.failing.Load() {
		return nil
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.lastErr
}

func (f *failures) failed(err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.lastErr = err
	f.failing.Store(true)
	f.count++
	f.total++
	if now := time.Now(); now.Sub(f.lastLogged) >= failureLogEvery {
		f.log.Error("decision log writes fail; retrying with backoff (toolpdp_decision_log_write_errors_total counts them)",
			"error", err.Error(), "failed_attempts", f.count, "next_message_in", failureLogEvery.String())
		f.lastLogged, f.count = now, 0
	}
}

func (f *failures) succeeded() {
	if !f.failing.Load() {
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.log.Info("decision log writes succeed again", "failed_attempts", f.total)
	f.failing.Store(false)
	f.lastErr, f.next, f.count, f.total, f.lastLogged = nil, 0, 0, 0, time.Time{}
}

// wait is how long to wait before the next attempt.
func (f *failures) wait() time.Duration {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.next == 0 {
		f.next = f.backoff.Min
	} else {
		f.next = min(2*f.next, f.backoff.Max)
	}
	return f.next
}
