package console

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// redirect answers a form post with 303 to a page, with a notice for it to
// show. The notice travels in a cookie signed with the console's secret,
// never in the URL: a link anyone can write must not make the console say
// what its author likes ("log in at …").
func (c *Console) redirect(w http.ResponseWriter, r *http.Request, to, notice string) {
	if notice != "" {
		setCookie(w, r, noticeCookie, c.noticeValue(notice, c.now()), int(noticeLifetime/time.Second))
	}
	http.Redirect(w, r, to, http.StatusSeeOther)
}

const (
	noticeCookie = "skipq_console_notice"
	// noticeLifetime is how long a notice waits for the page it is for:
	// the redirect's GET follows at once.
	noticeLifetime = time.Minute
)

// A notice cookie is "issuedUnix.text.mac", text in base64url.
func (c *Console) noticeMAC(text string, issued time.Time) []byte {
	m := hmac.New(sha256.New, c.cfg.Secret)
	fmt.Fprintf(m, "skipq console notice|%d|%s", issued.Unix(), text)
	return m.Sum(nil)
}

func (c *Console) noticeValue(text string, issued time.Time) string {
	return strconv.FormatInt(issued.Unix(), 10) + "." + base64.RawURLEncoding.EncodeToString([]byte(text)) + "." +
		base64.RawURLEncoding.EncodeToString(c.noticeMAC(text, issued))
}

// takeNotice is the notice a redirect left for this page ("" when there is
// none, or it is not the console's), and clears it: it shows once.
func (c *Console) takeNotice(w http.ResponseWriter, r *http.Request) string {
	ck, err := r.Cookie(noticeCookie)
	if err != nil {
		return ""
	}
	setCookie(w, r, noticeCookie, "", -1)
	parts := strings.Split(ck.Value, ".")
	if len(parts) != 3 {
		return ""
	}
	unix, err1 := strconv.ParseInt(parts[0], 10, 64)
	text, err2 := base64.RawURLEncoding.DecodeString(parts[1])
	mac, err3 := base64.RawURLEncoding.DecodeString(parts[2])
	issued := time.Unix(unix, 0)
	if err1 != nil || err2 != nil || err3 != nil || !hmac.Equal(mac, c.noticeMAC(string(text), issued)) ||
		c.now().Sub(issued) > noticeLifetime+clockSkew || issued.Sub(c.now()) > clockSkew {
		return ""
	}
	return string(text)
}
