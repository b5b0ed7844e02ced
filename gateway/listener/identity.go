package listener

import (
	"crypto/x509"
	"errors"
	"fmt"
)

// The certificate fields CertIdentity can take a client's identity from.
const (
	IdentityCN       = "cn"        // the subject's common name
	IdentitySANDNS   = "san-dns"   // the first DNS name of the subject alternative names
	IdentitySANEmail = "san-email" // the first e-mail address of the subject alternative names
	IdentitySANURI   = "san-uri"   // the first URI of the subject alternative names
)

// CheckIdentityField returns an error unless field is one of the Identity
// constants.
func CheckIdentityField(field string) error {
	switch field {
	case IdentityCN, IdentitySANDNS, IdentitySANEmail, IdentitySANURI:
		return nil
	}
	return fmt.Errorf("certificate identity: %q is not %s, %s, %s or %s",
		field, IdentityCN, IdentitySANDNS, IdentitySANEmail, IdentitySANURI)
}

// CertIdentity returns the identity a client certificate proves, taken
// from field (one of the Identity constants): the subject's common name,
// or the first subject alternative name of the kind. A certificate
// without that field, or with it empty, proves none: an error. cert is
// the leaf the handshake verified (Conn.PeerCertificate).
func CertIdentity(cert *x509.Certificate, field string) (string, error) {
	if cert == nil {
		return "", errors.New("certificate identity: no certificate")
	}
	var id string
	switch field {
	case IdentityCN:
		id = cert.Subject.CommonName
	case IdentitySANDNS:
		if len(cert.DNSNames) > 0 {
			id = cert.DNSNames[0]
		}
	case IdentitySANEmail:
		if len(cert.EmailAddresses) > 0 {
			id = cert.EmailAddresses[0]
		}
	case IdentitySANURI:
		if len(cert.URIs) > 0 {
			id = cert.URIs[0].String()
		}
	default:
		return "", CheckIdentityField(field)
	}
	if id == "" {
		return "", fmt.Errorf("certificate identity: the certificate of %q has no %s", cert.Subject.String(), field)
	}
	return id, nil
}
