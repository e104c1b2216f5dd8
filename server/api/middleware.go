package api

import (
	"bytes"
	"fmt"
	"io"
	"log/slog"
	"mime"
	"net"
	"net/http"
	"net/netip"
	"runtime/debug"
	"strings"
	"time"

	"github.com/outboxd/outboxd/internal/access"
	"github.com/outboxd/outboxd/server/internal/apidb"
)

// A browser on another site can make requests to the API on the victim's
// behalf: to the loopback address, where no token is needed, or through a
// name of its own re-pointed at 127.0.0.1 (DNS rebinding). The three
// guards below close the ways it has.

// hostGuard refuses, with 421, a request whose Host header is not a name
// of this server: with a loopback listen, anything but localhost and
// loopback addresses (and allowed); with another listen, when allowed is
// set, any host name not in it. A rebinding page's requests carry its own
// name in Host, whatever address that name resolves to. An IP address in
// Host cannot be rebound, so with a listen that is not loopback it passes:
// probes and scrapers address a pod by its IP.
func hostGuard(listen string, allowed []string, next http.Handler) http.Handler {
	loopback := access.IsLoopback(listen)
	if !loopback && len(allowed) == 0 {
		return next // reachable under any name anyway; the token guards it
	}
	names := make(map[string]bool, len(allowed))
	for _, name := range allowed {
		names[hostName(name)] = true
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		host := hostName(r.Host)
		_, ipErr := netip.ParseAddr(host)
		if !names[host] && !access.IsLoopbackHost(host) && (loopback || ipErr != nil) {
			writeError(w, http.StatusMisdirectedRequest, fmt.Sprintf("host %q is not a name of this server (see http.allowed_hosts)", host))
			return
		}
		next.ServeHTTP(w, r)
	})
}

// hostName is the lower-case host of a Host header or listen address,
// without port, brackets or a final dot.
func hostName(hostport string) string {
	host := hostport
	if h, _, err := net.SplitHostPort(hostport); err == nil {
		host = h
	}
	return strings.TrimSuffix(strings.ToLower(strings.Trim(host, "[]")), ".")
}

// refuseCrossOrigin refuses, with 403, a state-changing request a browser
// sends from another origin (Sec-Fetch-Site, or an Origin that is not the
// Host). Clients that are not browsers send neither header and pass.
func refuseCrossOrigin(next http.Handler) http.Handler {
	guard := http.NewCrossOriginProtection()
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := guard.Check(r); err != nil {
			writeError(w, http.StatusForbidden, "refused: "+err.Error())
			return
		}
		next.ServeHTTP(w, r)
	})
}

// requireJSON refuses, with 415, a request of a method that may change
// state whose body is not declared application/json (UTF-8). A page on
// another site can send text/plain, form and multipart bodies without the
// browser asking the server first; application/json it cannot. A request
// with neither a body nor a Content-Type passes: it has nothing to
// declare (curl -X DELETE, a generated client calling an endpoint whose
// body is optional or absent), and the endpoint answers 400 if it needs
// a body.
func requireJSON(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.Method {
		case http.MethodGet, http.MethodHead, http.MethodOptions:
			next.ServeHTTP(w, r)
			return
		}
		contentType := r.Header.Get("Content-Type")
		if empty := bodyless(r); empty && contentType == "" {
			next.ServeHTTP(w, r)
			return
		}
		mediaType, params, err := mime.ParseMediaType(contentType)
		if charset, set := params["charset"]; err != nil || mediaType != "application/json" || (set && !strings.EqualFold(charset, "utf-8")) {
			writeError(w, http.StatusUnsupportedMediaType, "request body: want Content-Type: application/json")
			return
		}
		next.ServeHTTP(w, r)
	})
}

// bodyless reports whether r has no body, reading one byte of a body of
// unknown length (chunked) to know. An empty body becomes http.NoBody
// with a ContentLength of 0, so the endpoints see one kind of absent
// body; a body that is there is left as it was, that byte included.
func bodyless(r *http.Request) bool {
	switch {
	case r.ContentLength > 0:
		return false
	case r.ContentLength < 0:
		var first [1]byte
		n, _ := io.ReadFull(r.Body, first[:])
		if n > 0 {
			r.Body = struct {
				io.Reader
				io.Closer
			}{io.MultiReader(bytes.NewReader(first[:n]), r.Body), r.Body}
			return false
		}
	}
	r.Body, r.ContentLength = http.NoBody, 0
	return true
}

// authenticate answers 401 to a request from no one it knows (no valid
// bearer token, not a user named by a trusted proxy) when any token or
// proxy is configured, and hands the identity on in the request's context
// (access.IdentityOf). The tokens are compared in constant time, hashed
// first, so that not even their length leaks through timing.
func authenticate(a *access.Authenticator, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id, err := a.Authenticate(r)
		if err != nil {
			w.Header().Set("WWW-Authenticate", `Bearer realm="outboxd"`)
			writeError(w, http.StatusUnauthorized, err.Error())
			return
		}
		next.ServeHTTP(w, r.WithContext(access.WithIdentity(r.Context(), id)))
	})
}

// allow answers 403 naming the role an endpoint needs
// ({"error", "required_role"}) to a request whose identity's role does not
// grant it; the endpoint runs otherwise.
func allow(need access.Role, h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		id, _ := access.IdentityOf(r.Context())
		if !id.Role.Allows(need) {
			writeBody(w, http.StatusForbidden, map[string]string{
				"error":         fmt.Sprintf("%s %s needs the %s role; %q has the %s role", r.Method, r.URL.Path, need, id.Name, id.Role),
				"required_role": string(need),
			})
			return
		}
		h(w, r)
	}
}

// limitBody caps every request body at MaxRequestBodyBytes.
func limitBody(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		r.Body = http.MaxBytesReader(w, r.Body, MaxRequestBodyBytes)
		next.ServeHTTP(w, r)
	})
}

// recoverPanics turns a handler panic into a 500 with a plain message; the
// stack goes to the log, never to the client.
func recoverPanics(log *slog.Logger, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer func() {
			v := recover()
			if v == nil {
				return
			}
			if v == http.ErrAbortHandler {
				panic(v)
			}
			log.ErrorContext(r.Context(), "http api: handler panicked", "method", r.Method, "path", r.URL.Path,
				"panic", v, "stack", string(debug.Stack()))
			writeError(w, http.StatusInternalServerError, "internal error")
		}()
		next.ServeHTTP(w, r)
	})
}

// boundQueries gives each request's database work the deadline of
// apidb.Context: with the statement timeout of the API's pool, no request
// holds a connection longer than timeout, and none waits for one forever.
func boundQueries(timeout time.Duration, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := apidb.Context(r.Context(), timeout)
		defer cancel()
		next.ServeHTTP(w, r.WithContext(ctx))
	})
}
