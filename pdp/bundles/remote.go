package bundles

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/open-policy-agent/opa/v1/bundle"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/toolpdp/toolpdp/internal/clip"
	"github.com/toolpdp/toolpdp/pdp/tokenfile"
)

// SourceStatus is what Status tells of one --bundle source.
type SourceStatus struct {
	Name        string    // DisplayName: no credential
	Remote      bool      // a bundle server
	LastError   string    // the last download's error; "" after one that succeeded
	LastSuccess time.Time // the last download that succeeded (a 304 included); zero: none yet
	Stale       bool      // not refreshed for several polls
}

// Status reports every source, in --bundle order.
func (s *Sources) Status() []SourceStatus {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]SourceStatus, 0, len(s.Paths))
	for _, p := range s.Paths {
		st := SourceStatus{Name: DisplayName(p), Remote: IsRemote(p)}
		if r := s.remote[p]; r != nil {
			st.LastSuccess = r.lastSuccess
			if r.err != nil {
				st.LastError = r.err.Error()
			}
			st.Stale = s.staleLocked(r)
		}
		out = append(out, st)
	}
	return out
}

// DownloadErrors is the current error of every bundle server whose last
// download failed, each naming its source; nil when none did.
func (s *Sources) DownloadErrors() []error {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []error
	for _, p := range s.Paths {
		if r := s.remote[p]; r != nil && r.err != nil {
			out = append(out, fmt.Errorf("bundle %s: %w", DisplayName(p), r.err))
		}
	}
	return out
}

func (s *Sources) staleLocked(r *remoteBundle) bool {
	if s.every <= 0 {
		return false
	}
	since := r.lastSuccess
	if since.IsZero() {
		since = r.started
	}
	return s.now().Sub(since) > staleAfterPolls*s.every+s.timeout()
}

func (s *Sources) timeout() time.Duration {
	if s.DownloadTimeout > 0 {
		return s.DownloadTimeout
	}
	return DefaultDownloadTimeout
}

// sourceMetrics are the bundle servers' metrics.
type sourceMetrics struct {
	lastDownload *prometheus.GaugeVec
}

// Collectors are the sources' Prometheus metrics, to register once.
func (s *Sources) Collectors() []prometheus.Collector {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.initMetricsLocked()
	return []prometheus.Collector{s.metrics.lastDownload}
}

func (s *Sources) initMetricsLocked() {
	if s.metrics == nil {
		s.metrics = &sourceMetrics{lastDownload: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "toolpdp_bundle_last_successful_download_timestamp_seconds",
			Help: "Unix time of the last download from a bundle server that succeeded (a 304 Not Modified included), by source (its URL without credentials).",
		}, []string{"source"})}
	}
}

// PollNow asks every bundle server to be polled at once (serve's SIGHUP).
func (s *Sources) PollNow() {
	s.mu.Lock()
	kicks := s.pollNow
	s.mu.Unlock()
	for _, ch := range kicks {
		select {
		case ch <- struct{}{}:
		default: // a poll is asked for already
		}
	}
}

// Failed is told of every failed download, with the source's name.
type Failed func(source string, err error)

// startRemote starts polling every http(s) source, until ctx ends; changed
// is called after each download that brings new content or a new error,
// failed after every failed one. Each poll sends the last ETag, so an
// unchanged bundle costs the server a 304.
func (s *Sources) startRemote(ctx context.Context, every time.Duration, log *slog.Logger, changed func(), failed Failed) error {
	token := s.Remote.Token
	var pollers []*poller
	for _, p := range s.Paths {
		if !IsRemote(p) {
			continue
		}
		if token == nil && s.Remote.TokenFile != "" {
			var err error
			if token, err = tokenfile.Open(s.Remote.TokenFile, 1, "--bundle-token-file", log); err != nil {
				return err
			}
			go token.Run(ctx, 0)
		}
		c, err := newClient(p, s.Remote, token)
		if err != nil {
			return fmt.Errorf("bundle %s: %w", DisplayName(p), err)
		}
		pollers = append(pollers, &poller{src: p, c: c, kick: make(chan struct{}, 1)})
	}
	if len(pollers) == 0 {
		return nil
	}
	s.mu.Lock()
	if s.now == nil {
		s.now = time.Now
	}
	s.every = every
	s.initMetricsLocked()
	if s.remote == nil {
		s.remote = map[string]*remoteBundle{}
	}
	s.pollNow = nil
	for _, p := range pollers {
		s.remote[p.src] = &remoteBundle{started: s.now()}
		s.pollNow = append(s.pollNow, p.kick)
	}
	s.mu.Unlock()
	// Each server is polled on its own: one that stalls until the deadline
	// delays no other.
	for _, p := range pollers {
		go func() {
			t := time.NewTicker(every)
			defer t.Stop()
			for {
				if s.poll(ctx, p, log, failed) {
					changed()
				}
				select {
				case <-ctx.Done():
					return
				case <-t.C:
				case <-p.kick:
				}
			}
		}()
	}
	return nil
}

type poller struct {
	src  string
	c    *client
	kick chan struct{} // PollNow
}

// poll downloads once and records the outcome; it reports whether the
// sources' content or errors changed.
func (s *Sources) poll(ctx context.Context, p *poller, log *slog.Logger, failed Failed) bool {
	s.mu.Lock()
	etag := s.remote[p.src].etag
	s.mu.Unlock()
	got, err := p.c.fetch(ctx, etag, s.timeout(), s.Limits, readsAll(s.Verify))
	if err == nil && got.notModified && etag == "" {
		err = errors.New("download: the server answered 304 Not Modified to a request that named no ETag: there is no bundle to keep")
	}
	var b *bundleValue
	if err == nil && !got.notModified {
		b, err = s.parse(got)
	}
	if ctx.Err() != nil {
		return false // shutting down: nothing to report
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	r := s.remote[p.src]
	now := s.now()
	if err != nil {
		err = clipped(err)
		news := r.err == nil || r.err.Error() != err.Error()
		r.err, r.everErr = err, err // the last good download, if any, stays
		r.log.failed(log, p.c.name, err, now)
		if failed != nil {
			failed(p.c.name, err)
		}
		return news
	}
	hadErr := r.err != nil
	r.err, r.lastSuccess = nil, now
	r.log.recovered(log, p.c.name)
	s.metrics.lastDownload.WithLabelValues(p.c.name).Set(float64(now.UnixNano()) / 1e9)
	if got.notModified {
		return hadErr
	}
	r.etag = got.etag
	if b.digest == r.digest && r.bundle != nil {
		return hadErr // a new ETag, the same content: nothing to reload
	}
	r.bundle, r.files, r.digest, r.everErr = b.b, b.files, b.digest, nil
	return true
}

// clipped is err with its text cut to maxErrorBytes.
func clipped(err error) error {
	if msg := err.Error(); len(msg) > maxErrorBytes {
		return errors.New(clip.Middle(msg, maxErrorBytes))
	}
	return err
}

type bundleValue struct {
	b      *bundle.Bundle
	files  []file
	digest string
}

// parse reads a download's files as a bundle.
func (s *Sources) parse(got *fetched) (*bundleValue, error) {
	b, err := readFiles(&filesLoader{files: got.files}, s.Verify)
	if err != nil {
		return nil, fmt.Errorf("the downloaded bundle is rejected: %w", err)
	}
	return &bundleValue{b: b.Bundle, files: got.files, digest: digest(got.files)}, nil
}
