package upstream

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"net"
	"net/url"
	"strings"
)

// clientText is err's text as a client may read it: without the backend's address. A failed
// exchange's error names the URL it posted to (url.Error), the addresses it dialled or read
// from (net.OpError), the host it looked up (net.DNSError) or its certificate's names
// (x509.HostnameError); a client learns from them where the gateway's backends are, which is
// the operator's to know. What the error says happened is kept: "dial tcp: connect:
// connection refused". The whole text goes to the log (llm.Error.Detail).
func clientText(err error) string {
	switch e := err.(type) {
	case *url.Error:
		return clientText(e.Err)
	case *net.OpError:
		op := e.Op
		if e.Net != "" {
			op += " " + e.Net
		}
		if e.Err == nil {
			return op
		}
		return op + ": " + clientText(e.Err)
	case *net.DNSError:
		return "lookup of the backend's host: " + e.Err
	case x509.HostnameError:
		return "x509: the backend's certificate is not valid for its host name"
	case *tls.CertificateVerificationError:
		return "tls: failed to verify certificate: " + clientText(e.Err)
	}
	s := err.Error()
	if inner := errors.Unwrap(err); inner != nil {
		if t, whole := clientText(inner), inner.Error(); t != whole {
			s = strings.Replace(s, whole, t, 1) // a wrapper's own words, its cause's without addresses
		}
	}
	return s
}
