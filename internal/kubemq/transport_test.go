package kubemq_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"io"
	"log/slog"
	"math/big"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/connectivity"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/keepalive"

	"github.com/skipq/skipq/internal/kubemq/kubemqpb"
	"github.com/skipq/skipq/internal/node"
	"github.com/skipq/skipq/internal/testdb"
)

// The Go SDK v2 pings every 10 s even without calls; grpc-go's default
// policy would answer the third such ping with GOAWAY too_many_pings.
func TestKeepalivePingsWithoutCalls(t *testing.T) {
	t.Parallel()
	e := newNode(t)
	conn, err := grpc.NewClient(e.Addr, grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithKeepaliveParams(keepalive.ClientParameters{Time: 10 * time.Second, Timeout: 5 * time.Second, PermitWithoutStream: true}))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	kq := kubemqpb.NewKubemqClient(conn)
	if _, err := kq.Ping(ctx(t), &kubemqpb.Empty{}); err != nil {
		t.Fatal(err)
	}
	// A call can complete on the new connection before the channel reports
	// READY: wait for that first, or the wait below would see CONNECTING
	// change to READY.
	for s := conn.GetState(); s != connectivity.Ready; s = conn.GetState() {
		if !conn.WaitForStateChange(ctx(t), s) {
			t.Fatalf("the connection never became READY (still %s)", s)
		}
	}
	c, cancel := context.WithTimeout(context.Background(), 35*time.Second)
	defer cancel()
	if conn.WaitForStateChange(c, connectivity.Ready) {
		t.Fatalf("the idle connection left READY (now %s): the server refused the keepalive pings", conn.GetState())
	}
	if _, err := kq.Ping(ctx(t), &kubemqpb.Empty{}); err != nil {
		t.Fatal(err)
	}
}

func TestTLSAndMetrics(t *testing.T) {
	certFile, keyFile, pool := selfSigned(t)
	e := newNode(t, func(c *node.Config) { c.KubeMQ.TLSCert, c.KubeMQ.TLSKey = certFile, keyFile })
	conn, err := grpc.NewClient(e.Addr, grpc.WithTransportCredentials(
		credentials.NewTLS(&tls.Config{RootCAs: pool, ServerName: "localhost", MinVersion: tls.VersionTLS12})))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := kubemqpb.NewKubemqClient(conn).Ping(ctx(t), &kubemqpb.Empty{}); err != nil {
		t.Fatalf("ping over TLS: %v", err)
	}
	if _, err := e.kq.Ping(ctx(t), &kubemqpb.Empty{}); err == nil {
		t.Fatal("a plaintext call reached the TLS endpoint")
	}

	resp, err := http.Get(e.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	if !strings.Contains(string(raw), `skipq_kubemq_call_duration_seconds_count{code="OK",method="/kubemq.kubemq/Ping"} 1`) {
		t.Fatalf("no KubeMQ call in the metrics:\n%s", raw)
	}
}

// selfSigned writes a certificate for localhost and its key, and returns
// their files and a pool that trusts the certificate.
func selfSigned(t *testing.T) (certFile, keyFile string, pool *x509.CertPool) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "localhost"},
		DNSNames: []string{"localhost"}, NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	certFile, keyFile = filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	certPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	if err := os.WriteFile(certFile, certPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}), 0o600); err != nil {
		t.Fatal(err)
	}
	pool = x509.NewCertPool()
	pool.AppendCertsFromPEM(certPEM)
	return certFile, keyFile, pool
}

// A node that shuts down ends its downstream calls with CloseByServer,
// releasing what they hold, and its upstream calls, without waiting for
// their clients.
func TestShutdown(t *testing.T) {
	db := testdb.New(t)
	addr := freeAddr(t)
	cfg := node.DefaultConfig()
	cfg.DatabaseURL, cfg.ListenAddr, cfg.Auth, cfg.KubeMQ.Addr = db, "127.0.0.1:0", "off", addr
	runCtx, stop := context.WithCancel(context.Background())
	defer stop()
	ready, done := make(chan string, 1), make(chan error, 1)
	go func() {
		done <- node.Run(runCtx, cfg, slog.New(slog.NewJSONHandler(io.Discard, nil)), func(a string) { ready <- a })
	}()
	select {
	case <-ready:
	case err := <-done:
		t.Fatal(err)
	}
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	e := env{kq: kubemqpb.NewKubemqClient(conn)}
	e.send(t, msg("s", "held"))
	d := e.downstream(t)
	if m := d.get("s", 1, false).GetMessages(); len(m) != 1 {
		t.Fatalf("Get: %v", m)
	}
	up, err := e.kq.QueuesUpstream(ctx(t))
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	stop()
	if r := d.read(); r.GetRequestTypeData() != kubemqpb.QueuesDownstreamRequestType_CloseByServer {
		t.Fatalf("downstream at shutdown: %v", r)
	}
	if _, err := d.s.Recv(); err == nil {
		t.Fatal("the downstream call went on after CloseByServer")
	}
	_, err = up.Recv()
	wantCode(t, err, codes.Unavailable)
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the node did not stop within 10 s")
	}
	if took := time.Since(start); took > 5*time.Second {
		t.Fatalf("shutting down took %s", took)
	}
	// Released at once, not after the queue's 30 s visibility.
	next := startOn(t, db)
	if m := next.pull(t, "s", 1, false).GetMessages(); len(m) != 1 || m[0].GetAttributes().GetReceiveCount() != 2 {
		t.Fatalf("after the shutdown: %v", m)
	}
}
