package main

import (
	"archive/tar"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
)

// TestImage builds the image archive from this checkout, reads it back as
// an OCI layout, checks its configuration (non-root user, entrypoint, CA
// bundle) and runs the binary taken from its layer.
func TestImage(t *testing.T) {
	dir := t.TempDir()
	archive := filepath.Join(dir, "outboxd-image.tar")
	const version = "v0.0.0-imagetest"
	if err := Build(Options{Output: archive, Source: "../..", Version: version, Tag: "outboxd:test",
		Arch: runtime.GOARCH, CACertificates: DefaultCACertificates}); err != nil {
		t.Fatal(err)
	}
	img := readArchive(t, archive, filepath.Join(dir, "layout"))

	cfg, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	if u := cfg.Config.User; u == "" || u == "0" || u == "root" || strings.HasPrefix(u, "0:") {
		t.Errorf("image user %q: want a non-root uid", u)
	}
	if !slices.Equal(cfg.Config.Entrypoint, []string{"/usr/local/bin/outboxd"}) || !slices.Equal(cfg.Config.Cmd, []string{"serve"}) {
		t.Errorf("entrypoint %q cmd %q", cfg.Config.Entrypoint, cfg.Config.Cmd)
	}
	if cfg.OS != "linux" || cfg.Architecture != runtime.GOARCH {
		t.Errorf("platform %s/%s", cfg.OS, cfg.Architecture)
	}

	files := layerFiles(t, img)
	for _, want := range []string{"etc/ssl/certs/ca-certificates.crt", "etc/passwd", "usr/local/bin/outboxd"} {
		if _, ok := files[want]; !ok {
			t.Errorf("layer lacks %s", want)
		}
	}
	if strings.Contains(string(files["etc/passwd"]), ":/bin/sh") {
		t.Error("a user in /etc/passwd has a shell; the image has none")
	}
	bin := filepath.Join(dir, "outboxd")
	if err := os.WriteFile(bin, files["usr/local/bin/outboxd"], 0o755); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(bin, "--version").CombinedOutput()
	if first, _, _ := strings.Cut(string(out), "\n"); err != nil || first != "outboxd version "+version {
		t.Fatalf("outboxd --version from the image: %v %q", err, out)
	}
	if out, err := exec.Command(bin, "--help").CombinedOutput(); err != nil || !strings.Contains(string(out), "serve") {
		t.Fatalf("outboxd --help from the image: %v\n%s", err, out)
	}
	// Static: a binary that needs the C library cannot run on the
	// image's empty base.
	if out, err := exec.Command("ldd", bin).CombinedOutput(); err == nil && !strings.Contains(string(out), "not a dynamic executable") {
		t.Errorf("the binary is dynamically linked:\n%s", out)
	}
}

// readArchive untars an OCI layout archive into dir and returns its one image.
func readArchive(t *testing.T, archive, dir string) v1.Image {
	t.Helper()
	f, err := os.Open(archive)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	eachTarEntry(t, f, func(h *tar.Header, body []byte) {
		path := filepath.Join(dir, filepath.FromSlash(h.Name))
		parent := filepath.Dir(path)
		if h.Typeflag == tar.TypeDir {
			parent = path
		}
		if err := os.MkdirAll(parent, 0o755); err != nil {
			t.Fatal(err)
		}
		if h.Typeflag == tar.TypeReg {
			if err := os.WriteFile(path, body, 0o644); err != nil {
				t.Fatal(err)
			}
		}
	})
	index, err := layout.ImageIndexFromPath(dir)
	if err != nil {
		t.Fatal(err)
	}
	manifest, err := index.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	if len(manifest.Manifests) != 1 || manifest.Manifests[0].Annotations["org.opencontainers.image.ref.name"] != "outboxd:test" {
		t.Fatalf("index lists %+v, want the one image tagged outboxd:test", manifest.Manifests)
	}
	img, err := index.Image(manifest.Manifests[0].Digest)
	if err != nil {
		t.Fatal(err)
	}
	return img
}

// layerFiles returns the regular files of img's layers by path.
func layerFiles(t *testing.T, img v1.Image) map[string][]byte {
	t.Helper()
	layers, err := img.Layers()
	if err != nil {
		t.Fatal(err)
	}
	files := map[string][]byte{}
	for _, l := range layers {
		rc, err := l.Uncompressed()
		if err != nil {
			t.Fatal(err)
		}
		eachTarEntry(t, rc, func(h *tar.Header, body []byte) {
			if h.Typeflag == tar.TypeReg {
				files[h.Name] = body
			}
		})
		rc.Close()
	}
	return files
}

// eachTarEntry calls f with every entry of the tar stream r and its content.
func eachTarEntry(t *testing.T, r io.Reader, f func(h *tar.Header, body []byte)) {
	t.Helper()
	tr := tar.NewReader(r)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return
		}
		if err != nil {
			t.Fatal(err)
		}
		body, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		f(h, body)
	}
}
