package apitest

import (
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"
)

// dbProxy stands between a node and PostgreSQL on a loopback port, so a
// test can cut the database away (every connection dropped, new ones
// refused) and bring it back, without touching the server other tests share.
type dbProxy struct {
	t      *testing.T
	addr   string // 127.0.0.1:port, stable across cut/restore
	target func() (net.Conn, error)

	mu    sync.Mutex
	ln    net.Listener
	conns map[net.Conn]bool
}

// newDBProxy proxies the server of dbURL and returns the proxy and a URL
// of the same database through it.
func newDBProxy(t *testing.T, dbURL string) (*dbProxy, string) {
	t.Helper()
	cfg, err := pgconn.ParseConfig(dbURL)
	if err != nil {
		t.Fatal(err)
	}
	target := func() (net.Conn, error) {
		if strings.HasPrefix(cfg.Host, "/") {
			return net.Dial("unix", fmt.Sprintf("%s/.s.PGSQL.%d", cfg.Host, cfg.Port))
		}
		return net.Dial("tcp", net.JoinHostPort(cfg.Host, fmt.Sprint(cfg.Port)))
	}
	p := &dbProxy{t: t, target: target, conns: map[net.Conn]bool{}}
	p.listen("127.0.0.1:0")
	t.Cleanup(p.cut)
	url := fmt.Sprintf("postgres://%s@%s/%s?sslmode=disable", cfg.User, p.addr, cfg.Database)
	return p, url
}

func (p *dbProxy) listen(addr string) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		p.t.Fatal(err)
	}
	p.mu.Lock()
	p.ln, p.addr = ln, ln.Addr().String()
	p.mu.Unlock()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go p.pipe(c)
		}
	}()
}

func (p *dbProxy) pipe(client net.Conn) {
	server, err := p.target()
	if err != nil {
		client.Close()
		return
	}
	p.mu.Lock()
	p.conns[client], p.conns[server] = true, true
	p.mu.Unlock()
	go func() { io.Copy(server, client); server.Close() }()
	io.Copy(client, server)
	client.Close()
}

// cut drops every proxied connection and refuses new ones.
func (p *dbProxy) cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ln != nil {
		p.ln.Close()
		p.ln = nil
	}
	for c := range p.conns {
		c.Close()
	}
	clear(p.conns)
}

// restore accepts connections again on the same address.
func (p *dbProxy) restore() { p.listen(p.addr) }
