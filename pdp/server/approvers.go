package server

import (
	"fmt"
	"strings"

	"github.com/toolpdp/toolpdp/pdp/approver"
	"github.com/toolpdp/toolpdp/pdp/askview"
	"github.com/toolpdp/toolpdp/pdp/console"
	"github.com/toolpdp/toolpdp/pdp/grpcapi"
	"github.com/toolpdp/toolpdp/pdp/notify"
	"github.com/toolpdp/toolpdp/pdp/session"
	"github.com/toolpdp/toolpdp/pdp/tokenfile"
	pb "github.com/toolpdp/toolpdp/proto/toolpdp/v1"
)

// approverAddrs refuses an approver address on TCP without approver
// tokens: containers of one pod share loopback.
func (s *Server) approverAddrs(cfg Config) error {
	for option, addrs := range map[string][]string{"--confirm-listen": cfg.ConfirmListen, "--console-listen": cfg.ConsoleListen} {
		for _, a := range addrs {
			if !strings.HasPrefix(a, "unix://") && !s.approvers.Enabled() {
				return fmt.Errorf("%w: %s %s is a TCP address, which every container of the pod can reach: give --approver-token-file (or serve it on a unix:///path in a directory the agent does not mount)", ErrUsage, option, a)
			}
		}
	}
	return nil
}

// approverSurfaces reads the approver tokens and builds the console and
// the notifier.
func (s *Server) approverSurfaces(cfg Config, ws *grpcapi.Workspaces) error {
	var err error
	if s.approvers, err = approver.Parse(cfg.ApproverTokens, cfg.Logger); err != nil {
		return fmt.Errorf("%w: %v", ErrUsage, err)
	}
	s.tokens = append(s.tokens, s.approvers.Files()...)
	if ws != nil {
		var agents []string
		for t := range ws.Tokens {
			agents = append(agents, t)
		}
		for _, f := range ws.Files {
			if t, err := f.Token(); err == nil {
				agents = append(agents, t)
			}
		}
		if name, ok := s.approvers.Overlaps(agents); ok {
			return fmt.Errorf("%w: --approver-token-file %s holds a workspace token (--workspace-token): an agent's token must never answer its own asks", ErrUsage, name)
		}
	}
	if len(cfg.ConsoleListen) > 0 {
		if s.console, err = console.New(console.Config{Engine: s.engine, Tokens: s.approvers, Open: !s.approvers.Enabled(), Workspace: ws != nil, Logger: cfg.Logger}); err != nil {
			return err
		}
	}
	if len(cfg.NotifyURLs) > 0 {
		nc := notify.Config{URLs: cfg.NotifyURLs, ConsoleURL: cfg.ConsoleURL, Logger: cfg.Logger,
			Show: func(c session.Call) *pb.PendingAsk { return s.engine.ShowAsk(c, askview.Options{}) }}
		if cfg.NotifySecretFile != "" {
			key, err := tokenfile.Open(cfg.NotifySecretFile, 16, "notify secret", cfg.Logger)
			if err != nil {
				return fmt.Errorf("--notify-secret-file: %w", err)
			}
			nc.Secret = func() ([]byte, error) { t, err := key.Token(); return []byte(t), err }
			s.tokens = append(s.tokens, key)
		}
		if s.notifier, err = notify.New(nc); err != nil {
			return fmt.Errorf("%w: %v", ErrUsage, err)
		}
		for _, c := range s.notifier.Collectors() {
			s.registry.MustRegister(c)
		}
		s.engine.OnAsk(s.notifier.Notify)
	}
	return nil
}
