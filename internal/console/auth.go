package console

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"fmt"
	"math"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/skipq/skipq/internal/auth"
	"github.com/skipq/skipq/internal/service"
)

// identity is who a console request acts as, as on the API.
type identity struct {
	Tenant string
	Role   int
	KeyID  int64
	// Name is the key's name, shown in the header ("" with auth off).
	Name string
}

var (
	roleRead  = auth.RoleRank("read")
	roleWrite = auth.RoleRank("write")
	roleAdmin = auth.RoleRank("admin")
)

func (id identity) CanWrite() bool { return id.Role >= roleWrite }
func (id identity) CanAdmin() bool { return id.Role >= roleAdmin }

const (
	sessionCookie = "skipq_console"
	csrfCookie    = "skipq_console_csrf"
	// SessionLifetime is how long a console login lasts.
	SessionLifetime = 12 * time.Hour
)

// handler is a console page or action for an identified visitor.
type handler func(w http.ResponseWriter, r *http.Request, id identity)

// need runs h for visitors whose role is at least min: without a session a
// page redirects to the login, an action answers 401; a weaker role gets 403.
func (c *Console) need(min int) func(handler) http.Handler {
	return func(h handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			id, err := c.identify(r)
			switch {
			case errors.Is(err, errNoSession) && r.Header.Get("HX-Request") == "true":
				// A poll whose session ended takes the whole page to the
				// login instead of swapping the login page into a table.
				w.Header().Set("HX-Redirect", "/console/login")
				w.WriteHeader(http.StatusUnauthorized)
				return
			case errors.Is(err, errNoSession) && r.Method == http.MethodGet:
				http.Redirect(w, r, "/console/login", http.StatusSeeOther)
				return
			case errors.Is(err, errNoSession):
				c.fail(w, r, identity{}, http.StatusUnauthorized, "Your console session has ended: log in again.")
				return
			case err != nil:
				c.serviceError(w, r, identity{}, err)
				return
			}
			if id.Role < min {
				c.fail(w, r, id, http.StatusForbidden, "This API key's role does not allow this action.")
				return
			}
			if r.Method == http.MethodPost {
				if err := r.ParseForm(); err != nil {
					c.formUnread(w, r, err)
					return
				}
			}
			// The session's key is recorded in the history of the
			// messages its actions change, as the API's is.
			h(w, r.WithContext(service.WithKeyID(r.Context(), id.KeyID)), id)
		})
	}
}

var errNoSession = errors.New("no console session")

// identify is the visitor's identity: the default admin with auth off,
// else the key of a valid session cookie.
func (c *Console) identify(r *http.Request) (identity, error) {
	if c.cfg.AuthOff {
		return identity{Tenant: "default", Role: roleAdmin}, nil
	}
	ck, err := r.Cookie(sessionCookie)
	if err != nil {
		return identity{}, errNoSession
	}
	keyID, issued, mac, ok := parseSession(ck.Value)
	// A session lasts SessionLifetime from its login, whatever its cookie's
	// Max-Age; one issued ahead of this node's clock by more than another
	// node's clock could be is forged or from a clock gone wrong.
	if now := c.now(); !ok || now.Sub(issued) > SessionLifetime || issued.Sub(now) > clockSkew {
		return identity{}, errNoSession
	}
	key, hash, err := c.sessionKey(r.Context(), keyID)
	if err != nil {
		return identity{}, err
	}
	if hash == nil || !hmac.Equal(mac, c.sessionMAC(keyID, issued, hash)) {
		return identity{}, errNoSession
	}
	return identity{Tenant: key.Tenant, Role: auth.RoleRank(key.Role), KeyID: key.ID, Name: key.Name}, nil
}

// clockSkew is how far apart the nodes' clocks may be.
const clockSkew = time.Minute

// sessionKey is a key and its secret's hash (nil when it is revoked or
// unknown), cached for sessionCheck.
func (c *Console) sessionKey(ctx context.Context, id int64) (auth.Key, []byte, error) {
	sc := &c.sessions
	sc.mu.Lock()
	e, ok := sc.entries[id]
	sc.mu.Unlock()
	if ok && c.now().Before(e.expires) {
		return e.key, e.hash, nil
	}
	key, hash, err := c.cfg.Keys.Session(ctx, id)
	if err != nil && !errors.Is(err, auth.ErrUnauthenticated) {
		return auth.Key{}, nil, err
	}
	c.remember(id, key, hash)
	return key, hash, nil
}

func (c *Console) remember(id int64, key auth.Key, hash []byte) {
	sc := &c.sessions
	sc.mu.Lock()
	defer sc.mu.Unlock()
	if len(sc.entries) >= sessionCacheLimit {
		clear(sc.entries)
	}
	sc.entries[id] = cachedSession{key: key, hash: hash, expires: c.now().Add(sessionCheck)}
}

// A session cookie is "keyID.issuedUnix.mac". The MAC is keyed with the
// node's secret (Config.Secret), which is not in the database, so a copy of
// the key table (a backup, a replica, a monitoring role) mints no session;
// it covers the hash of the key's secret as the database holds it now, so a
// revoked key's sessions end; and the issue time under it lets the node end
// a session after SessionLifetime whatever the cookie claims.
func (c *Console) sessionMAC(keyID int64, issued time.Time, secretHash []byte) []byte {
	m := hmac.New(sha256.New, c.cfg.Secret)
	fmt.Fprintf(m, "skipq console session|%d|%d|", keyID, issued.Unix())
	m.Write(secretHash)
	return m.Sum(nil)
}

func (c *Console) sessionValue(keyID int64, issued time.Time, secretHash []byte) string {
	return strconv.FormatInt(keyID, 10) + "." + strconv.FormatInt(issued.Unix(), 10) + "." +
		base64.RawURLEncoding.EncodeToString(c.sessionMAC(keyID, issued, secretHash))
}

func parseSession(v string) (keyID int64, issued time.Time, mac []byte, ok bool) {
	parts := strings.Split(v, ".")
	if len(parts) != 3 {
		return 0, time.Time{}, nil, false
	}
	keyID, err1 := strconv.ParseInt(parts[0], 10, 64)
	unix, err2 := strconv.ParseInt(parts[1], 10, 64)
	mac, err3 := base64.RawURLEncoding.DecodeString(parts[2])
	if err1 != nil || err2 != nil || err3 != nil {
		return 0, time.Time{}, nil, false
	}
	return keyID, time.Unix(unix, 0), mac, true
}

// callerKey holds a console request's Caller in its context.
type callerKey struct{}

// callerOf is the Caller Serve was given for r.
func callerOf(r *http.Request) Caller { return r.Context().Value(callerKey{}).(Caller) }

func setCookie(w http.ResponseWriter, r *http.Request, name, value string, maxAge int) {
	http.SetCookie(w, &http.Cookie{Name: name, Value: value, Path: "/console", MaxAge: maxAge,
		HttpOnly: true, SameSite: http.SameSiteStrictMode, Secure: callerOf(r).Secure()})
}

// csrfToken is the visitor's double-submit token: a random value in a
// SameSite=Strict cookie that forms repeat in a hidden field. Set on the
// first page a visitor gets.
func csrfToken(w http.ResponseWriter, r *http.Request) string {
	if ck, err := r.Cookie(csrfCookie); err == nil && len(ck.Value) >= 32 {
		return ck.Value
	}
	token := rand.Text()
	setCookie(w, r, csrfCookie, token, int(SessionLifetime/time.Second))
	return token
}

// sameOrigin: a state-changing request must come from this node's own
// pages: a browser says where it comes from (Origin, or at least
// Sec-Fetch-Site: same-origin), that is one of the node's public origins
// (the Caller's rule, the API's), and the request carries htmx's HX-Request
// header (which a cross-site form cannot set) or the form's CSRF token.
// The form is read only for that token, after the headers checked out; err
// is why it could not be read.
func (c *Console) sameOrigin(r *http.Request) (bool, error) {
	if r.Header.Get("Origin") == "" && r.Header.Get("Sec-Fetch-Site") != "same-origin" {
		return false, nil
	}
	if callerOf(r).CrossSite() {
		return false, nil
	}
	if r.Header.Get("HX-Request") == "true" {
		return true, nil
	}
	ck, err := r.Cookie(csrfCookie)
	if err != nil || ck.Value == "" {
		return false, nil
	}
	if err := r.ParseForm(); err != nil {
		return false, err
	}
	return subtle.ConstantTimeCompare([]byte(r.PostForm.Get("csrf")), []byte(ck.Value)) == 1, nil
}

func (c *Console) loginPage(w http.ResponseWriter, r *http.Request) {
	if c.cfg.AuthOff {
		http.Redirect(w, r, "/console/", http.StatusSeeOther)
		return
	}
	c.render(w, r, http.StatusOK, "login", identity{}, loginData{})
}

type loginData struct{ Message string }

func (c *Console) login(w http.ResponseWriter, r *http.Request) {
	if c.cfg.AuthOff {
		http.Redirect(w, r, "/console/", http.StatusSeeOther)
		return
	}
	if err := r.ParseForm(); err != nil {
		c.formUnread(w, r, err)
		return
	}
	secret := strings.TrimSpace(r.PostForm.Get("apiKey"))
	// The API's lookup, under the same budget of failed authentications
	// per address: the login page is one more way to try keys.
	key, wait, err := callerOf(r).LookUpKey(secret)
	switch {
	case errors.Is(err, auth.ErrUnauthenticated):
		c.render(w, r, http.StatusUnauthorized, "login", identity{}, loginData{Message: "That API key is unknown or revoked."})
		return
	case service.KindOf(err) == service.KindTooManyRequests:
		w.Header().Set("Retry-After", strconv.Itoa(max(1, int(math.Ceil(wait.Seconds())))))
		c.render(w, r, http.StatusTooManyRequests, "login", identity{}, loginData{Message: "Too many failed logins from this address: try again later."})
		return
	case err != nil:
		c.serviceError(w, r, identity{}, err)
		return
	}
	hash := sha256.Sum256([]byte(secret))
	c.remember(key.ID, key, hash[:])
	setCookie(w, r, sessionCookie, c.sessionValue(key.ID, c.now(), hash[:]), int(SessionLifetime/time.Second))
	http.Redirect(w, r, "/console/", http.StatusSeeOther)
}

func (c *Console) logout(w http.ResponseWriter, r *http.Request) {
	setCookie(w, r, sessionCookie, "", -1)
	http.Redirect(w, r, "/console/login", http.StatusSeeOther)
}
