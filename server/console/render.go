package console

import (
	"bytes"
	"embed"
	"fmt"
	"html/template"
	"io/fs"
	"net/http"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/outboxd/outboxd/internal/access"
)

//go:embed assets/templates/*.html
var templateFiles embed.FS

//go:embed assets/static
var staticAssets embed.FS

// previewRunes bounds the payload shown in a list.
const previewRunes = 120

// pages holds one template set per page, each with the shared layout.
type pages struct {
	byName map[string]*template.Template
}

// funcs are the helpers the templates use. Everything they return is
// text for html/template to escape, except the CSRF field, which is
// built from a token that is URL-safe base64.
var funcs = template.FuncMap{
	"when": func(t any) string {
		switch t := t.(type) {
		case time.Time:
			return t.UTC().Format("2006-01-02 15:04:05Z")
		case *time.Time:
			if t == nil {
				return "-"
			}
			return t.UTC().Format("2006-01-02 15:04:05Z")
		}
		return "-"
	},
	"preview": func(raw []byte) string {
		s := string(bytes.Join(bytes.Fields(raw), []byte(" ")))
		if utf8.RuneCountInString(s) <= previewRunes {
			return s
		}
		return string([]rune(s)[:previewRunes]) + "…"
	},
	"hasPrefix": strings.HasPrefix,
	"sinkForms": newSinkForms,
}

// parsePages parses each page with the layout and the partials: the
// files whose names start with "_" define templates pages share (a form's
// fields) and are no pages themselves.
func parsePages() (*pages, error) {
	names, err := fs.Glob(templateFiles, "assets/templates/*.html")
	if err != nil {
		return nil, err
	}
	partials, err := fs.Glob(templateFiles, "assets/templates/_*.html")
	if err != nil {
		return nil, err
	}
	p := &pages{byName: map[string]*template.Template{}}
	for _, file := range names {
		name := strings.TrimSuffix(strings.TrimPrefix(file, "assets/templates/"), ".html")
		if name == "layout" || strings.HasPrefix(name, "_") {
			continue
		}
		files := append([]string{"assets/templates/layout.html", file}, partials...)
		t, err := template.New("layout.html").Funcs(funcs).ParseFS(templateFiles, files...)
		if err != nil {
			return nil, fmt.Errorf("console: template %s: %w", name, err)
		}
		p.byName[name] = t
	}
	return p, nil
}

// render writes page name with data, plus what every page needs: the
// CSRF token, whether sign-out applies, and the navigation.
func (c *Console) render(w http.ResponseWriter, r *http.Request, status int, name string, data map[string]any) {
	t, ok := c.pages.byName[name]
	if !ok {
		panic("console: no page " + name) // a programming error every test run catches
	}
	if inPortal(r) {
		// A tenant's page: nothing of the console's own sign-in shows.
		s, signedIn := portalSessionOf(r)
		data["Portal"], data["SignedIn"], data["CanOperate"], data["Tenant"] = true, signedIn, signedIn, s.Tenant
		if signedIn {
			data["CSRF"] = s.CSRF()
		}
	} else {
		v, _ := c.auth.identify(r)
		data["CSRF"] = c.auth.csrf(v)
		// A session can be ended here; a proxy's user signs out there.
		data["SignedIn"] = v.session != ""
		data["Who"] = v.id
		data["CanOperate"] = v.id.Role.Allows(access.RoleOperate)
	}
	data["Path"] = r.URL.Path
	var b bytes.Buffer
	if err := t.Execute(&b, data); err != nil {
		c.opt.Logger.Error("console: render "+name, "error", err)
		http.Error(w, "could not render the page; see the server log", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_, _ = w.Write(b.Bytes())
}

// staticFiles serves the stylesheet and script.
func staticFiles() http.Handler {
	sub, err := fs.Sub(staticAssets, "assets")
	if err != nil {
		panic(err) // the embedded tree is fixed at build time
	}
	files := http.FileServerFS(sub)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Cache-Control", "no-cache")
		files.ServeHTTP(w, r)
	})
}
