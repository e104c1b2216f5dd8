package destinations_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/outboxd/outboxd/core/sink"
	"github.com/outboxd/outboxd/destinations"
	"github.com/outboxd/outboxd/internal/testkit/testcert"
	"github.com/outboxd/outboxd/internal/testkit/testdb"
	"github.com/outboxd/outboxd/internal/testkit/testrelay"
	"github.com/outboxd/outboxd/internal/testkit/tokenserver"
	"github.com/outboxd/outboxd/netguard"
)

// testCA signs the TLS receivers' and the destinations' certificates of
// these tests; TestMain makes the process trust it, as an operator's
// system trust store would trust a tenant's receiver.
var testCA *testcert.Authority

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "outboxd-destinations-ca")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	if testCA, _, err = testcert.TrustInProcess(dir); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// authFixture is a migrated outbox with a store and a directory, whose
// clients may reach loopback addresses (the test's servers).
type authFixture struct {
	pool    *pgxpool.Pool
	store   *destinations.Store
	dir     *destinations.Directory
	clients *destinations.Clients
}

func newAuthFixture(t *testing.T) *authFixture {
	t.Helper()
	pool, ob := testdb.New(t)
	keys, err := destinations.ParseKeyring(testKey)
	if err != nil {
		t.Fatal(err)
	}
	dir, err := ob.Directory(keys, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	network, err := destinations.NetworkConfig{AllowPrivate: true}.Network()
	if err != nil {
		t.Fatal(err)
	}
	return &authFixture{pool: pool, store: ob.Destinations(keys), dir: dir, clients: network.Clients(10*time.Second, nil)}
}

// post sends body to destination id's URL through its client, as a
// delivery does, and returns the answer's status.
func (f *authFixture) post(t *testing.T, id string) (int, error) {
	t.Helper()
	if err := f.dir.Refresh(t.Context()); err != nil {
		t.Fatal(err)
	}
	live, ok := f.dir.Lookup(id)
	if !ok {
		t.Fatalf("destination %s is not in the directory", id)
	}
	// As a delivery: the endpoint first (it fails when a secret cannot
	// be opened), then its client.
	if _, err := live.Endpoint(time.Now()); err != nil {
		return 0, err
	}
	client, err := f.clients.For(live)
	if err != nil {
		return 0, err
	}
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, live.URL, bytes.NewReader([]byte(`{"n": 1}`)))
	if err != nil {
		t.Fatal(err)
	}
	resp, err := client.Do(req)
	if err != nil {
		return 0, err
	}
	defer netguard.DiscardBody(resp.Body)
	return resp.StatusCode, nil
}

// A destination's OAuth2 token is fetched once and reused while it is
// valid, fetched again once it expires, and when the receiver refuses it
// (401) fetched again and the request sent once more with the new one;
// headers ride along on every request. (Mutations: tokenSource.get
// ignoring its cached token fails the count of fetches; forget removed,
// the revoked token is sent again and the request answered 401; the
// retry removed, the request after the revocation is answered 401; a
// cached token kept whatever its expiry, the wait for the expired one to
// be fetched again times out.) It takes about 12 s: the token's own
// clock.
func TestOAuth2TokenIsCachedUntilItExpiresAndFetchedAgainOn401(t *testing.T) {
	t.Parallel()
	f := newAuthFixture(t)
	tokens := tokenserver.New(t, "outboxd-acme", "client-secret-9f2c")
	recv := tokens.NewReceiver(t)
	c, err := f.store.Create(t.Context(), f.pool, testdb.Actor, "acme", destinations.Spec{URL: recv.URL + "/hook",
		Auth: destinations.Auth{Headers: map[string]string{"X-Api-Key": "api-key-77a1"},
			OAuth2: &destinations.OAuth2{TokenURL: tokens.URL + "/token", ClientID: "outboxd-acme", ClientSecret: "client-secret-9f2c", Scopes: []string{"webhooks:write", "events"}}}})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		if code, err := f.post(t, c.ID); err != nil || code != http.StatusNoContent {
			t.Fatalf("request %d: %d, %v", i, code, err)
		}
	}
	if n := tokens.Fetches(); n != 1 {
		t.Fatalf("3 requests fetched %d tokens, want 1 (cached)", n)
	}
	if got := tokens.Scope(); got != "webhooks:write events" {
		t.Errorf("the token was asked for scope %q", got)
	}
	for _, r := range recv.Requests() {
		if r.Header.Get("X-Api-Key") != "api-key-77a1" {
			t.Fatalf("a request came without the destination's header: %v", r.Header)
		}
	}

	// The receiver stops accepting t1 (revoked): the next request is
	// refused once, a new token fetched, and the request sent again.
	tokens.Revoke()
	seen := len(recv.Requests())
	if code, err := f.post(t, c.ID); err != nil || code != http.StatusNoContent {
		t.Fatalf("after the revocation: %d, %v", code, err)
	}
	if got := recv.Requests()[seen:]; len(got) != 2 || got[0].Header.Get("Authorization") != "Bearer "+tokenserver.Token(1) || got[1].Header.Get("Authorization") != "Bearer "+tokenserver.Token(3) {
		t.Fatalf("after the revocation the receiver saw %+v, want the old token refused then the new one", got)
	}

	// A token that expires is fetched again (the oauth2 package renews
	// 10 s before the end: 20 s is ten seconds' validity).
	tokens.ExpiresIn.Store(20)
	tokens.Revoke()
	if code, err := f.post(t, c.ID); err != nil || code != http.StatusNoContent {
		t.Fatalf("%d, %v", code, err)
	}
	before := tokens.Fetches()
	if code, err := f.post(t, c.ID); err != nil || code != http.StatusNoContent {
		t.Fatalf("%d, %v", code, err)
	}
	if tokens.Fetches() != before {
		t.Fatal("a valid token was fetched again")
	}
	testrelay.WaitFor(t, 40*time.Second, "the expired token fetched again", func() bool {
		if code, err := f.post(t, c.ID); err != nil || code != http.StatusNoContent {
			t.Fatalf("%d, %v", code, err)
		}
		return tokens.Fetches() > before
	})
}

// A destination with a TLS client certificate presents it to a receiver
// that requires one; a destination without is refused by it. (Mutation:
// netguard.NewHTTPClient ignoring ClientCertificate fails the first
// request with a handshake error.)
func TestTLSClientCertificateIsPresentedToAReceiverRequiringIt(t *testing.T) {
	t.Parallel()
	f := newAuthFixture(t)
	recv := testCA.NewMTLSReceiver(t)
	certPEM, keyPEM := testCA.IssueValid(t, "acme-outboxd", false)
	with, err := f.store.Create(t.Context(), f.pool, testdb.Actor, "acme", destinations.Spec{URL: recv.URL + "/hook",
		Auth: destinations.Auth{TLSClientCert: &destinations.TLSClientCert{Cert: certPEM, Key: keyPEM}}})
	if err != nil {
		t.Fatal(err)
	}
	if code, err := f.post(t, with.ID); err != nil || code != http.StatusNoContent {
		t.Fatalf("with the certificate: %d, %v", code, err)
	}
	if peers := recv.Peers(); len(peers) != 1 || peers[0] != "acme-outboxd" {
		t.Fatalf("the receiver saw client certificates %v", recv.Peers())
	}
	if s := with.TLSClientCert; s == nil || s.Subject != "CN=acme-outboxd" || s.Key != destinations.Set {
		t.Errorf("the certificate is shown as %+v", s)
	}

	without, err := f.store.Create(t.Context(), f.pool, testdb.Actor, "acme", destinations.Spec{URL: recv.URL + "/hook"})
	if err != nil {
		t.Fatal(err)
	}
	if code, err := f.post(t, without.ID); err == nil {
		t.Fatalf("without a certificate the receiver answered %d", code)
	}
}

// The token endpoint is reached under the destinations' network policy:
// on a loopback address, refused by the default policy, the fetch fails
// for good (Permanent) and the endpoint never sees a request. (Mutation:
// tokenSource fetching through http.DefaultClient fails it.)
func TestTokenEndpointIsUnderTheNetworkPolicy(t *testing.T) {
	t.Parallel()
	f := newAuthFixture(t)
	strict, err := destinations.DefaultNetworkConfig().Network()
	if err != nil {
		t.Fatal(err)
	}
	f.clients = strict.Clients(10*time.Second, nil)
	tokens := tokenserver.New(t, "id", "client-secret-9f2c")
	c, err := f.store.Create(t.Context(), f.pool, testdb.Actor, "acme", destinations.Spec{URL: "https://receiver.example/hook",
		Auth: destinations.Auth{OAuth2: &destinations.OAuth2{TokenURL: tokens.URL + "/token", ClientID: "id", ClientSecret: "client-secret-9f2c"}}})
	if err != nil {
		t.Fatal(err)
	}
	_, err = f.post(t, c.ID)
	if !errors.Is(err, netguard.ErrNonPublicAddress) || !sink.IsPermanent(err) {
		t.Fatalf("got %v, want a permanent refusal by the network policy", err)
	}
	if n := tokens.Fetches(); n != 0 {
		t.Fatalf("the token endpoint granted %d tokens", n)
	}
}

// A token endpoint refusing the credentials is reported by status and
// error code, never with its answer's body, which may echo the secret.
// (Mutation: tokenError returning the oauth2 package's error fails it.)
func TestTokenRefusalNamesNoSecret(t *testing.T) {
	t.Parallel()
	f := newAuthFixture(t)
	tokens := tokenserver.New(t, "id", "the-right-secret")
	c, err := f.store.Create(t.Context(), f.pool, testdb.Actor, "acme", destinations.Spec{URL: "http://127.0.0.1:9/hook",
		Auth: destinations.Auth{OAuth2: &destinations.OAuth2{TokenURL: tokens.URL + "/token", ClientID: "id", ClientSecret: "client-secret-9f2c"}}})
	if err != nil {
		t.Fatal(err)
	}
	_, err = f.post(t, c.ID)
	if err == nil || strings.Contains(err.Error(), "client-secret-9f2c") || !strings.Contains(err.Error(), "401 (invalid_client)") {
		t.Fatalf("got %v, want the status and code without the secret", err)
	}
}

// Every part is validated on set, and refused with an error naming the
// field (the API answers 422 with it). (Mutation: Webhook-Signature
// removed from reservedHeaders fails the webhook-signature case.)
func TestAuthIsValidatedNamingTheField(t *testing.T) {
	t.Parallel()
	f := newAuthFixture(t)
	good, goodKey := testCA.IssueValid(t, "ok", false)
	expired, expiredKey := testCA.Issue(t, "old", false, time.Now().Add(-48*time.Hour), time.Now().Add(-time.Hour))
	_, otherKey := testCA.IssueValid(t, "other", false)
	oauth := &destinations.OAuth2{TokenURL: "https://auth.example/token", ClientID: "id", ClientSecret: "s3cret-value"}
	for _, tc := range []struct {
		name string
		auth destinations.Auth
		want string
	}{
		{"webhook-signature", destinations.Auth{Headers: map[string]string{"webhook-signature": "v1,x"}}, "headers.webhook-signature:"},
		{"webhook-id", destinations.Auth{Headers: map[string]string{"Webhook-Id": "x"}}, "headers.Webhook-Id:"},
		{"host", destinations.Auth{Headers: map[string]string{"Host": "x"}}, "headers.Host:"},
		{"content-length", destinations.Auth{Headers: map[string]string{"content-length": "1"}}, "headers.content-length:"},
		{"hop-by-hop", destinations.Auth{Headers: map[string]string{"Connection": "close"}}, "headers.Connection: a destination cannot set it (hop-by-hop)"},
		{"bad name", destinations.Auth{Headers: map[string]string{"X Key": "v"}}, "headers.X Key: not a valid header name"},
		{"newline", destinations.Auth{Headers: map[string]string{"X-Key": "a\r\nInjected: 1"}}, "headers.X-Key: the value holds control characters"},
		{"twice", destinations.Auth{Headers: map[string]string{"X-Key": "a", "x-key": "b"}}, "given twice"},
		{"authorization with oauth2", destinations.Auth{Headers: map[string]string{"Authorization": "Basic x"}, OAuth2: oauth}, "headers.Authorization: oauth2 sets it"},
		{"no secret", destinations.Auth{OAuth2: &destinations.OAuth2{TokenURL: "https://auth.example/token", ClientID: "id"}}, "oauth2.client_secret is required"},
		{"no client id", destinations.Auth{OAuth2: &destinations.OAuth2{TokenURL: "https://auth.example/token", ClientSecret: "x"}}, "oauth2.client_id is required"},
		{"token url", destinations.Auth{OAuth2: &destinations.OAuth2{TokenURL: "ftp://auth.example/token", ClientID: "id", ClientSecret: "x"}}, "oauth2.token_url:"},
		{"scope", destinations.Auth{OAuth2: &destinations.OAuth2{TokenURL: "https://auth.example/token", ClientID: "id", ClientSecret: "x", Scopes: []string{"a b"}}}, "oauth2.scopes[0]:"},
		{"not pem", destinations.Auth{TLSClientCert: &destinations.TLSClientCert{Cert: "hello", Key: goodKey}}, "tls_client_cert.cert: want a PEM certificate"},
		{"key mismatch", destinations.Auth{TLSClientCert: &destinations.TLSClientCert{Cert: good, Key: otherKey}}, "tls_client_cert.key: private key does not match public key"},
		{"no key", destinations.Auth{TLSClientCert: &destinations.TLSClientCert{Cert: good, Key: good}}, "tls_client_cert.key: want a PEM private key"},
		{"expired", destinations.Auth{TLSClientCert: &destinations.TLSClientCert{Cert: expired, Key: expiredKey}}, "tls_client_cert.cert: the certificate expired on"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := f.store.Create(t.Context(), f.pool, testdb.Actor, "acme", destinations.Spec{URL: "https://acme.example/hook", Auth: tc.auth})
			var input *destinations.InputError
			if !errors.As(err, &input) || !strings.HasPrefix(err.Error(), tc.want) && !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want an input error with %q", err, tc.want)
			}
			for _, secret := range []string{"s3cret-value", goodKey, otherKey, expiredKey} {
				if strings.Contains(err.Error(), secret) {
					t.Fatalf("the error repeats a secret: %v", err)
				}
			}
		})
	}
}

// Once set, no secret value is ever shown: not by Create, Get, List or
// Update (each shows "set"), not in the audit trail, not in the database
// (sealed); PATCH merges (a header changed, one removed, the OAuth2
// client secret kept when left out), and null removes a part.
// (Mutation: saveAuth storing json.Marshal(a) as shown fails the first
// check of Get.)
func TestAuthIsSealedNeverShownAndPatchedByMerge(t *testing.T) {
	t.Parallel()
	pool, ob := testdb.New(t)
	keys, err := destinations.ParseKeyring(testKey)
	if err != nil {
		t.Fatal(err)
	}
	st := ob.Destinations(keys)
	certPEM, keyPEM := testCA.IssueValid(t, "acme", false)
	secrets := []string{"api-key-77a1", "client-secret-9f2c", "PRIVATE KEY", strings.Split(keyPEM, "\n")[1]}
	c, err := st.Create(t.Context(), pool, testdb.Actor, "acme", destinations.Spec{URL: "https://acme.example/hook",
		Auth: destinations.Auth{Headers: map[string]string{"X-Api-Key": "api-key-77a1", "X-Team": "payments"},
			OAuth2:        &destinations.OAuth2{TokenURL: "https://auth.acme.example/token?token=tokenurlcred", ClientID: "outboxd", ClientSecret: "client-secret-9f2c"},
			TLSClientCert: &destinations.TLSClientCert{Cert: certPEM, Key: keyPEM}}})
	if err != nil {
		t.Fatal(err)
	}
	shows := func(what string, v any) string {
		t.Helper()
		b, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range append(secrets, "tokenurlcred") {
			if bytes.Contains(b, []byte(s)) {
				t.Fatalf("%s shows a secret (%q): %s", what, s, b)
			}
		}
		return string(b)
	}
	shows("Create", c)
	got, err := st.Get(t.Context(), pool, "acme", c.ID)
	if err != nil {
		t.Fatal(err)
	}
	body := shows("Get", got)
	for _, want := range []string{`"X-Api-Key":"set"`, `"client_secret":"set"`, `"client_id":"outboxd"`, `"cert":"set"`, `"key":"set"`} {
		if !strings.Contains(body, want) {
			t.Errorf("Get shows %s, without %s", body, want)
		}
	}
	page, _, err := st.List(t.Context(), pool, "acme", "", 10)
	if err != nil {
		t.Fatal(err)
	}
	if shows("List", page); len(page) != 1 || page[0].OAuth2 == nil || page[0].Headers["X-Team"] != destinations.Set {
		t.Errorf("List shows %+v", page)
	}
	var dump string
	if err := pool.QueryRow(t.Context(), "SELECT a::text FROM "+ob.Schema()+".destination_auth a").Scan(&dump); err != nil {
		t.Fatal(err)
	}
	shows("the stored row", dump)

	// A merge: one header changed, one removed; oauth2 sent back as shown
	// (its secret "set", its URL redacted) with another scope keeps the
	// secret and the URL.
	v := "api-key-88b2"
	shownURL := got.OAuth2.TokenURL
	p := destinations.Patch{AuthPatch: destinations.AuthPatch{Headers: map[string]*string{"x-api-key": &v, "X-Team": nil},
		OAuth2: destinations.Nullable[destinations.OAuth2]{Set: true, Value: &destinations.OAuth2{TokenURL: shownURL, ClientID: "outboxd", ClientSecret: destinations.Set, Scopes: []string{"write"}}}}}
	updated, err := st.Update(t.Context(), pool, testdb.Actor, "acme", c.ID, p)
	if err != nil {
		t.Fatal(err)
	}
	secrets = append(secrets, v)
	shows("Update", updated)
	if len(updated.Headers) != 1 || updated.Headers["x-api-key"] != destinations.Set || updated.TLSClientCert == nil ||
		len(updated.OAuth2.Scopes) != 1 || updated.OAuth2.TokenURL != shownURL {
		t.Errorf("after the merge: %+v", updated.AuthSummary)
	}
	dir, err := ob.Directory(keys, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	tokens := tokenserver.New(t, "outboxd", "client-secret-9f2c")
	// The kept secret still opens and authenticates: the token endpoint
	// grants a token for it.
	p = destinations.Patch{AuthPatch: destinations.AuthPatch{TLSClientCert: destinations.Nullable[destinations.TLSClientCert]{Set: true},
		OAuth2: destinations.Nullable[destinations.OAuth2]{Set: true, Value: &destinations.OAuth2{TokenURL: tokens.URL}}}}
	if updated, err = st.Update(t.Context(), pool, testdb.Actor, "acme", c.ID, p); err != nil {
		t.Fatal(err)
	}
	if updated.TLSClientCert != nil {
		t.Errorf("null did not remove the certificate: %+v", updated.TLSClientCert)
	}
	network, err := destinations.NetworkConfig{AllowPrivate: true}.Network()
	if err != nil {
		t.Fatal(err)
	}
	f := &authFixture{pool: pool, store: st, dir: dir, clients: network.Clients(10*time.Second, nil)}
	if _, err := f.post(t, c.ID); tokens.Fetches() != 1 {
		t.Fatalf("the kept client secret was not granted a token: %v", err)
	}

	var audit string
	if err := pool.QueryRow(t.Context(), "SELECT string_agg(a::text, ' ') FROM "+ob.Schema()+".audit_log a").Scan(&audit); err != nil {
		t.Fatal(err)
	}
	shows("the audit trail", audit)
	if !strings.Contains(audit, "tls_client_cert") {
		t.Errorf("the audit trail does not name the parts changed: %s", audit)
	}
}

// Rekey seals a destination's authentication again under the new key
// with its signing secrets: once the old key is gone, its requests still
// carry their header. (Mutation: Rekey without rekeyAuth reseals 1 and
// the directory without the old key cannot open the authentication.)
func TestRekeyResealsTheAuthentication(t *testing.T) {
	t.Parallel()
	pool, ob := testdb.New(t)
	oldKeys, err := destinations.ParseKeyring(testKey)
	if err != nil {
		t.Fatal(err)
	}
	recv := testCA.NewMTLSReceiver(t)
	certPEM, keyPEM := testCA.IssueValid(t, "acme-outboxd", false)
	c, err := ob.Destinations(oldKeys).Create(t.Context(), pool, testdb.Actor, "acme", destinations.Spec{URL: recv.URL + "/hook",
		Auth: destinations.Auth{Headers: map[string]string{"X-Api-Key": "api-key-77a1"}, TLSClientCert: &destinations.TLSClientCert{Cert: certPEM, Key: keyPEM}}})
	if err != nil {
		t.Fatal(err)
	}
	newKey, err := destinations.NewKey("k2")
	if err != nil {
		t.Fatal(err)
	}
	both, err := destinations.ParseKeyring(newKey + "," + testKey)
	if err != nil {
		t.Fatal(err)
	}
	if n, err := ob.Destinations(both).Rekey(t.Context(), pool, testdb.Actor); err != nil || n != 2 {
		t.Fatalf("rekey resealed %d, %v; want the signing secret and the authentication", n, err)
	}
	newOnly, err := destinations.ParseKeyring(newKey)
	if err != nil {
		t.Fatal(err)
	}
	dir, err := ob.Directory(newOnly, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	network, err := destinations.NetworkConfig{AllowPrivate: true}.Network()
	if err != nil {
		t.Fatal(err)
	}
	f := &authFixture{pool: pool, store: ob.Destinations(newOnly), dir: dir, clients: network.Clients(10*time.Second, nil)}
	if code, err := f.post(t, c.ID); err != nil || code != http.StatusNoContent {
		t.Fatalf("after the rekey, without the old key: %d, %v", code, err)
	}
	if reqs := recv.Requests(); len(reqs) != 1 || reqs[0].Get("X-Api-Key") != "api-key-77a1" {
		t.Fatalf("the receiver saw %v", reqs)
	}
}

// A token endpoint the network policy refuses is refused at the door,
// as a destination URL is: on create, and on an update that changes it
// (422 naming oauth2.token_url), storing nothing; an update that keeps
// it is not checked again. (Mutations: Create without checkTokenURL
// stores the loopback token endpoint; patchAuth without it stores the
// change to one.)
func TestTokenURLMeetsTheNetworkPolicyAtTheDoor(t *testing.T) {
	t.Parallel()
	f := newAuthFixture(t)
	strict, err := destinations.DefaultNetworkConfig().Network()
	if err != nil {
		t.Fatal(err)
	}
	st := f.store.WithNetwork(strict)
	private := &destinations.OAuth2{TokenURL: "http://127.0.0.1:9/token", ClientID: "id", ClientSecret: "client-secret-9f2c"}
	_, err = st.Create(t.Context(), f.pool, testdb.Actor, "acme", destinations.Spec{URL: "https://93.184.215.14/hook", Auth: destinations.Auth{OAuth2: private}})
	var input *destinations.InputError
	if !errors.As(err, &input) || !strings.HasPrefix(err.Error(), "oauth2.token_url: ") {
		t.Fatalf("create with a loopback token endpoint: %v; want an input error naming oauth2.token_url", err)
	}
	public := &destinations.OAuth2{TokenURL: "https://93.184.215.14/token", ClientID: "id", ClientSecret: "client-secret-9f2c"}
	c, err := st.Create(t.Context(), f.pool, testdb.Actor, "acme", destinations.Spec{URL: "https://93.184.215.14/hook", Auth: destinations.Auth{OAuth2: public}})
	if err != nil {
		t.Fatal(err)
	}
	_, err = st.Update(t.Context(), f.pool, testdb.Actor, "acme", c.ID, destinations.Patch{AuthPatch: destinations.AuthPatch{
		OAuth2: destinations.Nullable[destinations.OAuth2]{Set: true, Value: &destinations.OAuth2{TokenURL: private.TokenURL}}}})
	if !errors.As(err, &input) || !strings.HasPrefix(err.Error(), "oauth2.token_url: ") {
		t.Fatalf("update to a loopback token endpoint: %v; want an input error naming oauth2.token_url", err)
	}
	got, err := st.Get(t.Context(), f.pool, "acme", c.ID)
	if err != nil || got.OAuth2 == nil || got.OAuth2.TokenURL != public.TokenURL {
		t.Fatalf("after the refused update: %+v, %v", got.OAuth2, err)
	}
}

// A receiver that echoes the request in its answer (as debugging
// endpoints do) gets its secrets back scrubbed: the answer a delivery
// records, and quotes in its error, holds neither the destination's
// header values nor its bearer token. (Mutation: scrubbed returning resp
// as it is fails it.)
func TestAnEchoingReceiverGetsNoSecretIntoTheAnswer(t *testing.T) {
	t.Parallel()
	f := newAuthFixture(t)
	tokens := tokenserver.New(t, "id", "client-secret-9f2c")
	echo := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusBadRequest)
		_ = r.Header.Write(w)
	}))
	t.Cleanup(echo.Close)
	c, err := f.store.Create(t.Context(), f.pool, testdb.Actor, "acme", destinations.Spec{URL: echo.URL + "/hook",
		Auth: destinations.Auth{Headers: map[string]string{"X-Api-Key": "api-key-77a1"},
			OAuth2: &destinations.OAuth2{TokenURL: tokens.URL, ClientID: "id", ClientSecret: "client-secret-9f2c"}}})
	if err != nil {
		t.Fatal(err)
	}
	answer := f.answer(t, c.ID)
	if strings.Contains(answer, "api-key-77a1") || strings.Contains(answer, tokenserver.Token(1)) || !strings.Contains(answer, "X-Api-Key: [REDACTED]") {
		t.Fatalf("the echoed answer holds a secret, or was not scrubbed:\n%s", answer)
	}
}

// answer posts to destination id as post does and returns the answer's
// body.
func (f *authFixture) answer(t *testing.T, id string) string {
	t.Helper()
	if err := f.dir.Refresh(t.Context()); err != nil {
		t.Fatal(err)
	}
	live, _ := f.dir.Lookup(id)
	client, err := f.clients.For(live)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := client.Post(live.URL, "application/json", strings.NewReader(`{}`))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
