package main

import (
	"archive/tar"
	"bufio"
	"context"
	"crypto/x509"
	"debug/elf"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// The container image, built by `make image` into a podman store of the test's own (vfs, so
// it works where overlay mounts do not), checked from the outside: `podman run` is not
// possible in every sandbox, so the test reads the image's configuration, exports its root
// filesystem and runs the binary from it, chrooted as the image's user when it can.

// podman finds podman, or skips (fails under CI: .ci/run installs it).
func podman(t *testing.T) string {
	t.Helper()
	p, err := exec.LookPath("podman")
	if err == nil {
		return p
	}
	if os.Getenv("CI") != "" {
		t.Fatal("no podman on PATH and CI is set: .ci/run installs Debian's podman")
	}
	t.Skip("no podman on PATH; install Debian's podman package to test the image")
	return ""
}

// imageConfig is what the test reads of `podman image inspect`.
type imageConfig struct {
	Size   int64
	Config struct {
		User         string
		Entrypoint   []string
		Cmd          []string
		Labels       map[string]string
		ExposedPorts map[string]struct{}
	}
}

func TestImage(t *testing.T) {
	if os.Getenv("TOLLGATE_IMAGE_TEST") == "" {
		t.Skip("TestImage runs in make test's own step (TOLLGATE_IMAGE_TEST=1): it builds a binary and an image, minutes on a cold cache")
	}
	pm := podman(t)
	store := t.TempDir()
	podmanCmd := []string{pm, "--root", filepath.Join(store, "root"), "--runroot", filepath.Join(store, "run"), "--storage-driver", "vfs"}
	run := func(args ...string) []byte {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		out, err := exec.CommandContext(ctx, podmanCmd[0], append(podmanCmd[1:], args...)...).Output()
		if err != nil {
			var ee *exec.ExitError
			if errors.As(err, &ee) {
				t.Fatalf("podman %s: %v\n%s", strings.Join(args, " "), err, ee.Stderr)
			}
			t.Fatalf("podman %s: %v", strings.Join(args, " "), err)
		}
		return out
	}
	const tag, version, commit = "localhost/tollgate-image-test:latest", "v9.8.7-test", "0123456789abcdef0123456789abcdef01234567"
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	mk := exec.CommandContext(ctx, "make", "-C", "../..", "image", "BIN="+filepath.Join(store, "bin"),
		"PODMAN="+strings.Join(podmanCmd, " "), "IMAGE="+tag, "VERSION="+version, "COMMIT="+commit)
	if out, err := mk.CombinedOutput(); err != nil {
		t.Fatalf("make image: %v\n%s", err, out)
	}
	t.Cleanup(func() { _ = exec.Command(podmanCmd[0], append(podmanCmd[1:], "rmi", "--force", tag)...).Run() })

	var inspected []imageConfig
	if err := json.Unmarshal(run("image", "inspect", tag), &inspected); err != nil || len(inspected) != 1 {
		t.Fatalf("podman image inspect: %v (%d images)", err, len(inspected))
	}
	img, want := inspected[0], readContainerfile(t)
	t.Logf("image size %d bytes", img.Size)
	cfg := img.Config
	if cfg.User != want.uid+":"+want.gid || want.uid == "0" {
		t.Errorf("user %q, want the Containerfile's %s:%s, not root", cfg.User, want.uid, want.gid)
	}
	if !slices.Equal(cfg.Entrypoint, want.entrypoint) || len(cfg.Cmd) != 0 {
		t.Errorf("entrypoint %q cmd %q, want %q and no cmd", cfg.Entrypoint, cfg.Cmd, want.entrypoint)
	}
	if cfg.Labels["org.opencontainers.image.version"] != version || cfg.Labels["org.opencontainers.image.revision"] != commit {
		t.Errorf("labels %v: want version %s and revision %s", cfg.Labels, version, commit)
	}
	if _, ok := cfg.ExposedPorts[want.listenPort+"/tcp"]; !ok {
		t.Errorf("exposed ports %v, want %s/tcp", cfg.ExposedPorts, want.listenPort)
	}

	root := filepath.Join(store, "rootfs")
	exportRoot(t, run, tag, root)
	checkStatic(t, filepath.Join(root, "tollgate"))
	pem, err := os.ReadFile(filepath.Join(root, "etc/ssl/certs/ca-certificates.crt"))
	if err != nil || !x509.NewCertPool().AppendCertsFromPEM(pem) {
		t.Errorf("the image's CA bundle: %v (or no certificate in it)", err)
	}
	out, err := exec.Command(filepath.Join(root, "tollgate"), "--version").Output()
	if err != nil || !strings.Contains(string(out), version) || !strings.Contains(string(out), commit) {
		t.Errorf("tollgate --version from the image: %q, %v; want %s and %s", out, err, version, commit)
	}
	serveFromImage(t, root, want)
}

// exportRoot writes the image's root filesystem into dir (podman create + export) and checks
// that it holds the binary and the CA bundle, and nothing else.
func exportRoot(t *testing.T, run func(...string) []byte, tag, dir string) {
	t.Helper()
	id := strings.TrimSpace(string(run("create", tag)))
	defer run("rm", id)
	archive := dir + ".tar"
	run("export", "--output", archive, id)
	f, err := os.Open(archive)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var files []string
	tr := tar.NewReader(f)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("the exported root: %v", err)
		}
		name := filepath.Join(dir, filepath.Clean("/"+h.Name))
		switch h.Typeflag {
		case tar.TypeDir:
			err = os.MkdirAll(name, 0o755)
		case tar.TypeReg:
			files = append(files, strings.TrimPrefix(h.Name, "/"))
			err = writeFile(name, tr, h.FileInfo().Mode())
		default:
			t.Errorf("the exported root has %s of type %c", h.Name, h.Typeflag)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	slices.Sort(files)
	if want := []string{"etc/ssl/certs/ca-certificates.crt", "tollgate"}; !slices.Equal(files, want) {
		t.Errorf("the image's files are %q, want only %q", files, want)
	}
}

func writeFile(name string, r io.Reader, mode os.FileMode) error {
	if err := os.MkdirAll(filepath.Dir(name), 0o755); err != nil {
		return err
	}
	f, err := os.OpenFile(name, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, mode)
	if err != nil {
		return err
	}
	_, err = io.Copy(f, r)
	return errors.Join(err, f.Close())
}

// checkStatic fails unless the binary is statically linked: no interpreter, no libraries.
func checkStatic(t *testing.T, path string) {
	t.Helper()
	f, err := elf.Open(path)
	if err != nil {
		t.Fatalf("the image's binary: %v", err)
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			t.Error("the image's binary has an ELF interpreter: it is not static (CGO_ENABLED=0)")
		}
	}
	if libs, _ := f.ImportedLibraries(); len(libs) > 0 {
		t.Errorf("the image's binary needs %q", libs)
	}
}

// serveFromImage runs the image's entrypoint from its root, chrooted as its user (as root
// only; otherwise from the host), on an ephemeral port of every address, and checks /readyz
// and the Host check a container's gateway has with no keys.
func serveFromImage(t *testing.T, root string, img containerfile) {
	t.Helper()
	args := append(slices.Clone(img.entrypoint[1:]), "--listen", "0.0.0.0:0") // the last --listen wins
	cmd := exec.Command(filepath.Join(root, img.entrypoint[0]), args...)
	cmd.Env = []string{} // nothing to discover: the embedded demo provider only
	if os.Geteuid() == 0 {
		uid, uerr := strconv.ParseUint(img.uid, 10, 32)
		gid, gerr := strconv.ParseUint(img.gid, 10, 32)
		if uerr != nil || gerr != nil {
			t.Fatalf("USER %s:%s: not numeric", img.uid, img.gid)
		}
		cmd.Path, cmd.Dir = img.entrypoint[0], "/"
		cmd.SysProcAttr = &syscall.SysProcAttr{Chroot: root, Credential: &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}}
	}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start the image's binary: %v", err)
	}
	exited := make(chan error, 1)
	addr := make(chan string, 1)
	go func() { // exits when the process closes its stderr, at its exit
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			var l struct{ Listen, Message string }
			if json.Unmarshal(sc.Bytes(), &l) == nil && strings.HasPrefix(l.Message, "tollgate is serving") {
				addr <- l.Listen
			}
		}
		exited <- cmd.Wait()
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGINT)
		if err := <-exited; err != nil {
			t.Errorf("the image's gateway exited: %v", err)
		}
	})
	var listen string
	select {
	case listen = <-addr:
	case err := <-exited:
		t.Fatalf("the image's gateway exited before serving: %v", err)
	case <-time.After(time.Minute):
		t.Fatal("the image's gateway did not say it serves within a minute")
	}
	_, port, err := net.SplitHostPort(listen)
	if err != nil {
		t.Fatalf("the gateway serves on %q: %v", listen, err)
	}
	for _, c := range []struct {
		host string
		want int
	}{{"127.0.0.1:" + port, 200}, {"localhost", 200}, {"rebind.test:" + port, 403}} {
		req, _ := http.NewRequest("GET", "http://127.0.0.1:"+port+"/readyz", nil)
		req.Host = c.host
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatalf("GET /readyz: %v", err)
		}
		resp.Body.Close()
		if resp.StatusCode != c.want {
			t.Errorf("GET /readyz with Host %s: %d, want %d", c.host, resp.StatusCode, c.want)
		}
	}
}
