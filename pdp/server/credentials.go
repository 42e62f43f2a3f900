package server

import (
	"context"
	"fmt"
	"os"
	"strings"

	"github.com/toolpdp/toolpdp/pdp"
	"github.com/toolpdp/toolpdp/pdp/grpcapi"
	"github.com/toolpdp/toolpdp/pdp/tokenfile"
)

// minWorkspaceToken is the shortest workspace token accepted: a guessable
// token binds nobody.
const minWorkspaceToken = 16

// openTokenFiles opens the bundle servers' token file, once for every
// source, and refuses a token file that another flag names too.
func (s *Server) openTokenFiles(ec *pdp.Config) error {
	named := map[string]string{}
	for _, spec := range s.cfg.WorkspaceTokens {
		if ws, file, ok := strings.Cut(spec, "="); ok {
			named["--workspace-token "+ws] = file
		}
	}
	if ec.Remote.TokenFile != "" {
		named["--bundle-token-file"] = ec.Remote.TokenFile
	}
	if err := tokenfile.Distinct(named); err != nil {
		return fmt.Errorf("%w: %v", ErrUsage, err)
	}
	if ec.Remote.TokenFile != "" && ec.Remote.Token == nil {
		f, err := tokenfile.Open(ec.Remote.TokenFile, 1, "--bundle-token-file", s.cfg.Logger)
		if err != nil {
			return err
		}
		ec.Remote.Token = f
		s.tokens = append(s.tokens, f)
	}
	return nil
}

// workspaceBinding opens the workspace token files; nil when nothing binds.
func (s *Server) workspaceBinding(mtls bool, specs []string) (*grpcapi.Workspaces, error) {
	if !mtls && len(specs) == 0 {
		return nil, nil
	}
	w := &grpcapi.Workspaces{MTLS: mtls, Files: map[string]*tokenfile.File{}}
	for _, spec := range specs {
		ws, file, ok := strings.Cut(spec, "=")
		if !ok || ws == "" || file == "" {
			return nil, fmt.Errorf("%w: --workspace-token %q is not WORKSPACE=FILE", ErrUsage, spec)
		}
		if _, dup := w.Files[ws]; dup {
			return nil, fmt.Errorf("%w: --workspace-token %s is given twice", ErrUsage, ws)
		}
		f, err := tokenfile.Open(file, minWorkspaceToken, "--workspace-token "+ws, s.cfg.Logger)
		if err != nil {
			return nil, err
		}
		for other, g := range w.Files {
			if mustToken(f) == mustToken(g) {
				return nil, fmt.Errorf("%w: --workspace-token %s and %s hold the same token: each workspace needs its own", ErrUsage, other, ws)
			}
		}
		w.Files[ws] = f
		s.tokens = append(s.tokens, f)
	}
	return w, nil
}

// mustToken is the token of a file Open has read.
func mustToken(f *tokenfile.File) string {
	t, _ := f.Token()
	return t
}

// reloadOn re-reads bundles and credentials at each signal until ctx ends.
func (s *Server) reloadOn(ctx context.Context, sig <-chan os.Signal) {
	for {
		select {
		case <-ctx.Done():
			return
		case got := <-sig:
			s.cfg.Logger.Info("re-reading bundles and credentials", "signal", signalName(got))
			s.Refresh(ctx)
		}
	}
}

// Refresh re-reads every credential file and every bundle now (bundle
// servers are polled at once), and reloads what changed.
func (s *Server) Refresh(ctx context.Context) {
	for _, f := range s.tokens {
		f.Reload()
	}
	_ = s.engine.Refresh(ctx) // a rejected load is logged and kept for Status by the engine
}

func signalName(sig os.Signal) string {
	if sig == nil {
		return ""
	}
	if sig.String() == "hangup" {
		return "SIGHUP"
	}
	return sig.String()
}
