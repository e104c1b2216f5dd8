// Package testcert makes the certificates of tests that speak TLS: a
// certificate authority, server certificates for 127.0.0.1 and client
// certificates it signs, in PEM, and TLS receivers that require a client
// certificate it signed (mutual TLS).
//
// A process trusts the authority as it would a system one when the
// SSL_CERT_FILE environment variable names its certificate (Go reads it
// at the process's first TLS handshake): TrustInProcess for the test's
// own process, from TestMain, or the variable passed to a child process.
package testcert

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"io"
	"log"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// Lifetime is how long the certificates Issue makes are valid, from an
// hour before they are made (clocks differ).
const Lifetime = 24 * time.Hour

// serial numbers the certificates, each unique within the process.
var serial atomic.Int64

// Authority is a test certificate authority.
type Authority struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	// PEM is its certificate, in PEM.
	PEM []byte
}

// NewAuthority makes an authority.
func NewAuthority() (*Authority, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	now := time.Now()
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(serial.Add(1)), Subject: pkix.Name{CommonName: "outboxd test CA"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(Lifetime), IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, fmt.Errorf("make the test CA: %w", err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	return &Authority{cert: cert, key: key, PEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})}, nil
}

// TrustInProcess makes a new authority, writes its certificate to a file
// in dir and points SSL_CERT_FILE at it, so that this process trusts it
// beside nothing else: call it from TestMain, before any TLS handshake.
// It returns the authority and the file.
func TrustInProcess(dir string) (*Authority, string, error) {
	ca, err := NewAuthority()
	if err != nil {
		return nil, "", err
	}
	file, err := ca.WriteFile(dir)
	if err != nil {
		return nil, "", err
	}
	return ca, file, os.Setenv("SSL_CERT_FILE", file)
}

// WriteFile writes the authority's certificate to ca.pem in dir and
// returns the file's path, for SSL_CERT_FILE.
func (a *Authority) WriteFile(dir string) (string, error) {
	file := filepath.Join(dir, "ca.pem")
	return file, os.WriteFile(file, a.PEM, 0o600)
}

// Pool is a certificate pool holding the authority alone.
func (a *Authority) Pool() *x509.CertPool {
	pool := x509.NewCertPool()
	pool.AddCert(a.cert)
	return pool
}

// Issue returns a certificate for cn signed by the authority, valid from
// notBefore to notAfter, for a server on 127.0.0.1 or for a client, and
// its private key (PKCS #8), both in PEM.
func (a *Authority) Issue(t testing.TB, cn string, server bool, notBefore, notAfter time.Time) (certPEM, keyPEM string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(serial.Add(1)), Subject: pkix.Name{CommonName: cn},
		NotBefore: notBefore, NotAfter: notAfter, KeyUsage: x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}
	if server {
		tmpl.ExtKeyUsage, tmpl.IPAddresses = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}, []net.IP{net.ParseIP("127.0.0.1")}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, a.cert, &key.PublicKey, a.key)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})),
		string(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}))
}

// IssueValid is Issue for a certificate valid now, for Lifetime.
func (a *Authority) IssueValid(t testing.TB, cn string, server bool) (certPEM, keyPEM string) {
	t.Helper()
	now := time.Now()
	return a.Issue(t, cn, server, now.Add(-time.Hour), now.Add(Lifetime))
}

// MTLSReceiver is an HTTPS receiver on 127.0.0.1 whose certificate the
// authority signed, that requires a client certificate the authority
// signed and answers 204 to each request, recording its client
// certificate's common name and its headers.
type MTLSReceiver struct {
	*httptest.Server
	mu       sync.Mutex
	peers    []string
	requests []http.Header
}

// NewMTLSReceiver starts a receiver, closed when the test ends.
func (a *Authority) NewMTLSReceiver(t testing.TB) *MTLSReceiver {
	t.Helper()
	r := &MTLSReceiver{}
	r.Server = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		_, _ = io.Copy(io.Discard, req.Body)
		r.mu.Lock()
		r.peers = append(r.peers, req.TLS.PeerCertificates[0].Subject.CommonName)
		r.requests = append(r.requests, req.Header.Clone())
		r.mu.Unlock()
		w.WriteHeader(http.StatusNoContent)
	}))
	certPEM, keyPEM := a.IssueValid(t, "receiver", true)
	pair, err := tls.X509KeyPair([]byte(certPEM), []byte(keyPEM))
	if err != nil {
		t.Fatal(err)
	}
	r.TLS = &tls.Config{Certificates: []tls.Certificate{pair}, ClientAuth: tls.RequireAndVerifyClientCert, ClientCAs: a.Pool()}
	// Handshakes without a certificate are what the receiver refuses:
	// not worth a line each in the test's output.
	r.Config.ErrorLog = log.New(io.Discard, "", 0)
	r.StartTLS()
	t.Cleanup(r.Close)
	return r
}

// Peers are the common names of the client certificates of the requests
// received so far, in order.
func (r *MTLSReceiver) Peers() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.peers...)
}

// Requests are the headers of the requests received so far, in order.
func (r *MTLSReceiver) Requests() []http.Header {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]http.Header(nil), r.requests...)
}
