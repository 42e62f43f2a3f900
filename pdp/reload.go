package pdp

import (
	"context"
	"errors"

	"github.com/toolpdp/toolpdp/pdp/bundles"
	"github.com/toolpdp/toolpdp/pdp/decisionlog"
	"github.com/toolpdp/toolpdp/pdp/loadchild"
	"github.com/toolpdp/toolpdp/pdp/policy"
)

// Reload builds a snapshot from the bundles and swaps it in; a bundle that
// fails to read, compile, validate or pass its own tests is rejected, and
// the last good snapshot keeps serving. With force false, bundles whose
// content has not changed since the last good load are not reloaded, and
// an error of a load since is cleared: what serves is what the sources
// hold again. Loads are serialised, but nothing that serves waits for one:
// decisions use the snapshot in force, and Status reads the last outcome.
func (e *Engine) Reload(ctx context.Context, force bool) error {
	e.loadMu.Lock()
	defer e.loadMu.Unlock()
	frozen, err := e.sources.Freeze()
	if err == nil && !force {
		serving, rejected := e.hashes()
		switch frozen.Hash {
		case serving:
			e.setOutcome(nil, frozen.Hash)
			return nil
		case rejected:
			return e.LastError() // the same content, refused already
		}
	}
	var snap *policy.Snapshot
	if err == nil {
		snap, err = e.load(ctx, frozen)
	}
	if err != nil {
		e.setOutcome(err, "")
		if frozen != nil {
			e.mu.Lock()
			e.rejected = frozen.Hash
			e.mu.Unlock()
		}
		switch {
		case errors.Is(err, bundles.ErrNotDownloaded):
			// Start-up, not a rejection: nothing to alert on.
			e.log.Info("waiting for the bundle server's first download; every decision is denied until a bundle loads", "bundles", e.sources.Names())
		case e.current.Load() == nil:
			e.metrics.reloads.WithLabelValues("rejected").Inc()
			e.log.Error("bundle rejected; no policy is loaded, so every decision is denied until a bundle loads", "bundles", e.sources.Names(), "error", err.Error())
		default:
			e.metrics.reloads.WithLabelValues("rejected").Inc()
			e.log.Error("bundle rejected; the last good policy keeps serving", "bundles", e.sources.Names(), "error", err.Error())
		}
		return err
	}
	for _, w := range snap.Warnings {
		e.log.Warn("bundle warning", "warning", w)
	}
	e.swap(ctx, snap)
	e.setOutcome(nil, frozen.Hash)
	e.metrics.loaded(snap, e.cfg.Now())
	e.log.Info("policy loaded", "revision", snap.Revision, "bundles", e.sources.Names())
	for _, f := range e.onSwap {
		f(snap)
	}
	return nil
}

// load builds the snapshot of the frozen sources. With a LoadChild
// configured, a child process loads the content first under its deadline
// and memory bound, tests included, and only content that loaded there is
// loaded here (its tests are not run twice).
func (e *Engine) load(ctx context.Context, frozen *bundles.Frozen) (*policy.Snapshot, error) {
	bs, err := frozen.Read(e.sources.Verify)
	if err != nil {
		return nil, err
	}
	opt := policy.WarnUnknownKeys(e.cfg.WarnUnknownKeys)
	if e.cfg.LoadChild == nil {
		snap, err := policy.NewSnapshot(ctx, bs, e.cfg.Now(), opt)
		if err != nil {
			return nil, err
		}
		return snap, policy.TestBundles(ctx, snap, bs, nil, e.cfg.TestTimeout)
	}
	req := loadchild.Request{Frozen: frozen, WarnUnknownKeys: e.cfg.WarnUnknownKeys, TestTimeout: e.cfg.TestTimeout}
	if err := loadchild.Check(ctx, *e.cfg.LoadChild, req); err != nil {
		return nil, err
	}
	return policy.NewSnapshot(ctx, bs, e.cfg.Now(), opt)
}

// hashes are the content hashes of the policy in force ("" before one)
// and of the content last rejected.
func (e *Engine) hashes() (serving, rejected string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.lastHash, e.rejected
}

// setOutcome records a load's outcome: err nil and the content's hash
// after a good one (or a load skipped as equal), err and "" after a
// rejected one (the hash of what serves stays).
func (e *Engine) setOutcome(err error, hash string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.lastErr = err
	if hash != "" {
		e.lastHash, e.rejected = hash, ""
	}
}

// swap makes s the snapshot every later request uses. Each swap is a new
// epoch: remembered approvals of the epochs before it no longer hold (the
// store keeps the epoch across a restart only while the content is
// unchanged).
func (e *Engine) swap(ctx context.Context, s *policy.Snapshot) {
	e.state.learn(s)
	epoch, err := e.state.store.Activate(ctx, s.Digest)
	if e.state.result(ctx, "activate", err) != nil {
		// No approval made before holds under an epoch nobody else has.
		epoch = "unshared." + NewDecisionID()
		e.log.Error("the state store failed; remembered approvals start afresh", "error", err.Error())
	}
	a := &active{snap: s, epoch: epoch}
	for _, b := range s.Bundles {
		a.bundles = append(a.bundles, decisionlog.Bundle{Name: b.Name, Revision: b.Revision})
	}
	if p := s.LogPolicy(); p != nil {
		a.logPolicy = p
	}
	// A new snapshot starts a new decision cache.
	if ok, why := s.Memoizable(); ok && e.cfg.DecisionCache > 0 {
		a.memo = policy.NewMemo(e.cfg.DecisionCache, 0)
	} else if !ok {
		e.log.Info("decisions of this policy are not cached", "revision", s.Revision, "reason", why)
	}
	e.current.Store(a)
}

// LastError is the error of the last rejected load, nil after a good one,
// joined with the error of every bundle server whose last download failed.
func (e *Engine) LastError() error {
	e.mu.Lock()
	err := e.lastErr
	e.mu.Unlock()
	downloads := e.sources.DownloadErrors()
	if errors.Is(err, bundles.ErrNotDownloaded) && len(downloads) > 0 {
		err = nil // the download errors say why
	}
	return errors.Join(append([]error{err}, downloads...)...)
}
