package server

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"log/slog"
	"os"
	"sync"

	"google.golang.org/grpc/credentials"
)

// transportCredentials serve TLS from f's files when a certificate is
// given, mTLS when a client CA is given too; nil for plaintext. The files
// are read at start (an error there is an error exit) and again on the
// first handshake after any of them changes, so a rotated certificate
// (a renewed Secret, cert-manager) is served without a restart.
func transportCredentials(f TLSFiles, log *slog.Logger) (credentials.TransportCredentials, error) {
	if f.CertFile == "" && f.KeyFile == "" {
		if f.ClientCAFile != "" {
			return nil, fmt.Errorf("%w: --tls-client-ca needs --tls-cert and --tls-key", ErrUsage)
		}
		return nil, nil
	}
	r := &certReloader{files: f, log: log}
	if _, err := r.current(); err != nil {
		return nil, err
	}
	cfg := &tls.Config{MinVersion: tls.VersionTLS12, GetCertificate: r.certificate}
	if f.ClientCAFile != "" {
		cfg.ClientAuth = tls.RequireAndVerifyClientCert
		// The CA pool is per handshake too: a config for each client,
		// with the pool in force now.
		cfg.GetConfigForClient = func(*tls.ClientHelloInfo) (*tls.Config, error) {
			m, err := r.current()
			if err != nil {
				return nil, err
			}
			return &tls.Config{MinVersion: tls.VersionTLS12, GetCertificate: r.certificate,
				ClientAuth: tls.RequireAndVerifyClientCert, ClientCAs: m.clientCAs}, nil
		}
	}
	return credentials.NewTLS(cfg), nil
}

// certReloader holds what the TLS files held when they last loaded.
type certReloader struct {
	files TLSFiles
	log   *slog.Logger

	mu     sync.Mutex
	stamp  string // each file's size and modification time at the last attempt
	loaded *material
}

type material struct {
	cert      *tls.Certificate
	clientCAs *x509.CertPool
}

func (r *certReloader) certificate(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	m, err := r.current()
	if err != nil {
		return nil, err
	}
	return m.cert, nil
}

// current is the material in force: loaded again when a file changed
// since the last attempt. A change that does not load (a key written
// after its certificate, a broken file) keeps the last good material
// serving and is logged; before any good load it is the error.
func (r *certReloader) current() (*material, error) {
	stamp := r.stampOf()
	r.mu.Lock()
	defer r.mu.Unlock()
	if stamp == r.stamp && r.loaded != nil {
		return r.loaded, nil
	}
	m, err := r.load()
	if err == nil {
		r.stamp, r.loaded = stamp, m
		return m, nil
	}
	if r.loaded == nil {
		return nil, err
	}
	if stamp != r.stamp {
		r.log.Error("TLS files changed but do not load; the last good certificate keeps serving", "error", err.Error())
		r.stamp = stamp
	}
	return r.loaded, nil
}

func (r *certReloader) stampOf() string {
	var out string
	for _, name := range []string{r.files.CertFile, r.files.KeyFile, r.files.ClientCAFile} {
		if name == "" {
			continue
		}
		if info, err := os.Stat(name); err == nil {
			out += fmt.Sprintf("%s:%d:%d;", name, info.Size(), info.ModTime().UnixNano())
		} else {
			out += name + ":missing;"
		}
	}
	return out
}

func (r *certReloader) load() (*material, error) {
	f := r.files
	cert, err := tls.LoadX509KeyPair(f.CertFile, f.KeyFile)
	if err != nil {
		return nil, fmt.Errorf("--tls-cert %s, --tls-key %s: %w", f.CertFile, f.KeyFile, err)
	}
	m := &material{cert: &cert}
	if f.ClientCAFile != "" {
		pemBytes, err := os.ReadFile(f.ClientCAFile)
		if err != nil {
			return nil, fmt.Errorf("--tls-client-ca: %w", err)
		}
		m.clientCAs = x509.NewCertPool()
		if !m.clientCAs.AppendCertsFromPEM(pemBytes) {
			return nil, fmt.Errorf("--tls-client-ca %s: no PEM certificate in it", f.ClientCAFile)
		}
	}
	return m, nil
}
