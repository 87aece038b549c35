// Command oidc-provider is the OpenID provider of the test suite: zitadel's OIDC library and its
// example login page, over TLS, with the suite's users, clients and claims, JWT access tokens, RFC 8693
// token exchange for the facade's client, and signing keys that can be rotated while it serves.
//
// Flags name the issuer (an https URL on the loopback), its certificate, the users file and the
// clients' redirect URIs. Users file: a JSON list of {id, password, name, groups, role, department}.
// The claims of every token: sub (the id), name, groups, yuxi_role, yuxi_department.
//
// POST /rotate-keys makes a new signing key current and keeps the old one published (the rotation an
// administrator makes at the provider); the suite calls it to see rotation followed without a restart.
package main

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"log"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"strings"
	"sync"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/google/uuid"
	"golang.org/x/text/language"

	"github.com/zitadel/oidc/v3/example/server/exampleop"
	"github.com/zitadel/oidc/v3/example/server/storage"
	"github.com/zitadel/oidc/v3/pkg/oidc"
	"github.com/zitadel/oidc/v3/pkg/op"
)

type person struct {
	ID         string   `json:"id"`
	Password   string   `json:"password"`
	Name       string   `json:"name"`
	Groups     []string `json:"groups"`
	Role       string   `json:"role"`
	Department *int64   `json:"department"`
}

// people is the users file as zitadel's example storage reads users.
type people map[string]*person

func (p people) GetUserByID(id string) *storage.User {
	if found, ok := p[id]; ok {
		return &storage.User{ID: found.ID, Username: found.ID, Password: found.Password, FirstName: found.Name,
			PreferredLanguage: language.English}
	}
	return nil
}

func (p people) GetUserByUsername(name string) *storage.User { return p.GetUserByID(name) }

func (p people) ExampleClientID() string { return "service" }

type signingKey struct {
	id  string
	key *rsa.PrivateKey
}

func (k *signingKey) SignatureAlgorithm() jose.SignatureAlgorithm { return jose.RS256 }
func (k *signingKey) Key() any                                    { return k.key }
func (k *signingKey) ID() string                                  { return k.id }

type publicKey struct{ *signingKey }

func (k publicKey) Algorithm() jose.SignatureAlgorithm { return jose.RS256 }
func (k publicKey) Use() string                        { return "sig" }
func (k publicKey) Key() any                           { return &k.key.PublicKey }

// store is the example storage with this suite's keys, clients and claims.
type store struct {
	*storage.Storage
	people    people
	lifetimes map[string]time.Duration
	exchanger string
	audiences map[string]bool
	mu        sync.Mutex
	keys      []*signingKey // the current one first
}

func newKey() *signingKey {
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		log.Fatal(err)
	}
	return &signingKey{id: uuid.NewString(), key: key}
}

func (s *store) rotate() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.keys = append([]*signingKey{newKey()}, s.keys...)
	return s.keys[0].id
}

func (s *store) SigningKey(context.Context) (op.SigningKey, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.keys[0], nil
}

func (s *store) SignatureAlgorithms(context.Context) ([]jose.SignatureAlgorithm, error) {
	return []jose.SignatureAlgorithm{jose.RS256}, nil
}

func (s *store) KeySet(context.Context) ([]op.Key, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	keys := make([]op.Key, 0, len(s.keys))
	for _, k := range s.keys {
		keys = append(keys, publicKey{k})
	}
	return keys, nil
}

// client gives every client JWT access tokens, the users' claims in ID tokens and its own lifetime.
type client struct {
	op.Client
	lifetime time.Duration
}

func (c client) AccessTokenType() op.AccessTokenType  { return op.AccessTokenTypeJWT }
func (c client) IDTokenUserinfoClaimsAssertion() bool { return true }
func (c client) IDTokenLifetime() time.Duration       { return c.lifetime }

func (s *store) GetClientByClientID(ctx context.Context, id string) (op.Client, error) {
	found, err := s.Storage.GetClientByClientID(ctx, id)
	if err != nil {
		return nil, err
	}
	return client{found, s.lifetimes[id]}, nil
}

func (s *store) claims(subject string) map[string]any {
	p, ok := s.people[subject]
	if !ok {
		return map[string]any{}
	}
	claims := map[string]any{"name": p.Name, "groups": p.Groups, "yuxi_role": p.Role}
	if p.Department != nil {
		claims["yuxi_department"] = *p.Department
	}
	return claims
}

func (s *store) SetUserinfoFromRequest(ctx context.Context, info *oidc.UserInfo, request op.IDTokenRequest, scopes []string) error {
	if err := s.Storage.SetUserinfoFromRequest(ctx, info, request, scopes); err != nil {
		return err
	}
	for k, v := range s.claims(request.GetSubject()) {
		info.AppendClaims(k, v)
	}
	return nil
}

func (s *store) GetPrivateClaimsFromScopes(ctx context.Context, subject, clientID string, scopes []string) (map[string]any, error) {
	return s.claims(subject), nil
}

// ValidateTokenExchangeRequest lets the exchanging client (and it only) trade a user's token for an
// access token of one allowed audience, for the same user.
func (s *store) ValidateTokenExchangeRequest(ctx context.Context, request op.TokenExchangeRequest) error {
	if request.GetClientID() != s.exchanger {
		return errors.New("this client may not exchange tokens")
	}
	audiences := request.GetAudience()
	if len(audiences) != 1 || !s.audiences[audiences[0]] {
		return fmt.Errorf("audience %v may not be asked for", audiences)
	}
	if _, ok := s.people[request.GetExchangeSubject()]; !ok {
		return errors.New("the subject token names nobody known")
	}
	request.SetRequestedTokenType(oidc.AccessTokenType)
	request.SetCurrentScopes([]string{oidc.ScopeOpenID})
	return nil
}

func (s *store) GetPrivateClaimsFromTokenExchangeRequest(ctx context.Context, request op.TokenExchangeRequest) (map[string]any, error) {
	claims := s.claims(request.GetSubject())
	claims["act"] = map[string]any{"sub": request.GetClientID()}
	return claims, nil
}

func main() {
	issuer := flag.String("issuer", "", "the issuer URL (https://127.0.0.1:<port>/)")
	cert := flag.String("cert", "", "the serving certificate (PEM)")
	key := flag.String("key", "", "its key (PEM)")
	usersFile := flag.String("users", "", "the users file")
	redirects := flag.String("redirect", "", "the redirect URIs of the clients, comma-separated")
	secret := flag.String("secret", "", "the secret of the confidential clients")
	lifetime := flag.Duration("lifetime", time.Hour, "the lifetime of the tokens")
	exchangeAudiences := flag.String("exchange-audiences", "", "audiences yuxi-facade may exchange a user's token for, comma-separated")
	flag.Parse()
	if *issuer == "" || *cert == "" || *key == "" || *usersFile == "" || *secret == "" {
		log.Fatal("-issuer, -cert, -key, -users and -secret are needed")
	}
	parsed, err := url.Parse(*issuer)
	if err != nil || parsed.Scheme != "https" {
		log.Fatalf("-issuer must be an https URL: %q", *issuer)
	}
	data, err := os.ReadFile(*usersFile)
	if err != nil {
		log.Fatal(err)
	}
	var list []person
	if err := json.Unmarshal(data, &list); err != nil {
		log.Fatalf("%s: %v", *usersFile, err)
	}
	users := people{}
	for i := range list {
		users[list[i].ID] = &list[i]
	}
	uris := strings.Split(*redirects, ",")
	// yuxi-facade: the facade's confidential client (authorization code with PKCE, token exchange);
	// yuxi-other: another application of the same provider, whose tokens the facade must refuse;
	// yuxi-short: the facade's audience with tokens that expire in two seconds.
	storage.RegisterClients(
		storage.WebClient("yuxi-facade", *secret, uris...),
		storage.WebClient("yuxi-other", *secret, uris...),
		storage.WebClient("yuxi-short", *secret, uris...),
	)
	allowed := map[string]bool{}
	for _, a := range strings.Split(*exchangeAudiences, ",") {
		if a != "" {
			allowed[a] = true
		}
	}
	s := &store{
		Storage:   storage.NewStorage(users),
		people:    users,
		lifetimes: map[string]time.Duration{"yuxi-facade": *lifetime, "yuxi-other": *lifetime, "yuxi-short": 2 * time.Second},
		exchanger: "yuxi-facade",
		audiences: allowed,
		keys:      []*signingKey{newKey()},
	}
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	router := exampleop.SetupServer(*issuer, s, logger, false)
	router.Post("/rotate-keys", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintln(w, s.rotate())
	})
	server := &http.Server{Addr: parsed.Host, Handler: router, ReadHeaderTimeout: 10 * time.Second}
	logger.Info("serving", "issuer", *issuer)
	if err := server.ListenAndServeTLS(*cert, *key); err != nil && !errors.Is(err, http.ErrServerClosed) {
		log.Fatal(err)
	}
}
